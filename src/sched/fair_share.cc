// Fair-share ledger and factors.
#include "sched/fair_share.h"

#include <cmath>

namespace gantry {

void FairShareLedger::Advance(TimeMs now, const std::map<std::string, double>& rates) {
  if (last_ < 0) last_ = now;
  double dt = static_cast<double>(now - last_);
  if (dt < 0) return;
  double h = static_cast<double>(half_life_ms_);
  double keep = std::exp2(-dt / h);
  double accrue = h / std::log(2.0) * (1 - keep);  // integral of 2^(-(dt-s)/h) ds over [0, dt]
  for (auto& [team, u] : usage_) u *= keep;
  for (const auto& [team, rate] : rates) usage_[team] += rate * accrue;
  last_ = now;
}

double UsageRate(const RunningJob& job, const Snapshot& snap, const GpuCatalog& catalog, bool price_weighted) {
  double rate = 0;
  for (const NodeShare& ns : job.placement.nodes) {
    if (ns.node < 0 || ns.node >= static_cast<int>(snap.nodes.size())) continue;
    const GpuType& type = catalog.Get(snap.nodes[ns.node].gpu_type());
    double price = price_weighted ? type.price_on_demand : 1.0;
    for (const GpuShare& g : ns.gpus) {
      double share = job.spec->request.sharing == SharingMode::kExclusive ? 1.0 : g.milli / 1000.0;
      rate += share * price / static_cast<double>(kHourMs);
    }
  }
  return rate;
}

std::map<std::string, double> FairShareFactors(const std::map<std::string, double>& usage, const QuotaConfig& quotas) {
  std::map<std::string, double> weight;
  for (const auto& [team, q] : quotas.teams) weight[team] = q.weight;
  for (const auto& [team, u] : usage) {
    if (!weight.count(team)) weight[team] = quotas.default_team.weight;
  }
  double total_weight = 0, total_usage = 0;
  for (const auto& [team, w] : weight) total_weight += w;
  for (const auto& [team, u] : usage) total_usage += u;
  std::map<std::string, double> factors;
  for (const auto& [team, w] : weight) {
    auto it = usage.find(team);
    double u = total_usage > 0 && it != usage.end() ? it->second / total_usage : 0;
    double s = total_weight > 0 ? w / total_weight : 1;
    factors[team] = std::exp2(-u / s);
  }
  return factors;
}

bool GuaranteeActs(double fair_factor, const SchedulerConfig& config) {
  return config.guarantee_max_use <= 0 || fair_factor > std::exp2(-config.guarantee_max_use);
}

}  // namespace gantry
