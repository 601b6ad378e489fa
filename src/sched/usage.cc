// UsageTracker: quota accounting for one cycle.
#include "sched/usage.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace gantry {

double PlacementShare(const Placement& p, SharingMode mode) {
  double share = 0;
  for (const NodeShare& ns : p.nodes) {
    for (const GpuShare& g : ns.gpus) share += GpuShareOf(g, mode);
  }
  return share;
}

UsageTracker::UsageTracker(const Snapshot& snap, const GpuCatalog& catalog, const QuotaConfig& quotas)
    : catalog_(catalog), quotas_(quotas), equal_share_(snap.equal_share) {
  auto limited = [](const TeamQuota& q) {
    return q.max_gpus >= 0 || q.borrow_limit >= 0 || q.user_max_gpus >= 0 || !q.project_max_gpus.empty();
  };
  has_limits_ = quotas.user_max_gpus >= 0 || limited(quotas.default_team);
  for (const auto& [team, q] : quotas.teams) has_limits_ = has_limits_ || limited(q);
  running_by_type_.assign(catalog.size(), 0.0);
  for (const RunningJob& r : snap.running) {
    if (r.placement.nodes.empty() || r.placement.nodes[0].node >= static_cast<int>(snap.nodes.size())) continue;
    GpuTypeId type = snap.nodes[r.placement.nodes[0].node].gpu_type();
    const double share = PlacementShare(r.placement, r.spec->request.sharing);
    Add(*r.spec, type, share);
    if (type < running_by_type_.size()) running_by_type_[type] += share;
  }
}

void UsageTracker::Add(const JobSpec& spec, GpuTypeId type, double share) {
  TeamUse& t = teams_[spec.team];
  if (t.by_type.empty()) t.by_type.assign(catalog_.size(), 0);
  t.total += share;
  t.by_type[type] += share;
  if (!spec.project.empty()) projects_[spec.team + "/" + spec.project] += share;
  users_[spec.user] += share;
}

const UsageTracker::TeamUse* UsageTracker::Find(const std::string& team) const {
  auto it = teams_.find(team);
  return it == teams_.end() ? nullptr : &it->second;
}

double UsageTracker::TeamTotal(const std::string& team) const {
  const TeamUse* use = Find(team);
  return use ? use->total : 0;
}

// GPUs held beyond the per-type guarantees (what the "any" pool must cover).
double UsageTracker::Over(const TeamQuota& q, const TeamUse* use, GpuTypeId type, double extra) const {
  double over = 0;
  for (size_t t = 0; t < catalog_.size(); ++t) {
    double used = (use ? use->by_type[t] : 0) + (t == type ? extra : 0);
    auto g = q.guaranteed.find(static_cast<GpuTypeId>(t));
    over += std::max(0.0, used - (g == q.guaranteed.end() ? 0 : g->second));
  }
  return over;
}

bool UsageTracker::WithinGuarantee(const std::string& team, GpuTypeId type, double share) const {
  const TeamQuota& q = quotas_.Team(team);
  return Over(q, Find(team), type, share) <= AnyPool(team, q) + 1e-9;
}

double UsageTracker::Borrowed(const std::string& team) const {
  const TeamQuota& q = quotas_.Team(team);
  const TeamUse* use = Find(team);
  if (!use) return 0;
  return std::max(0.0, Over(q, use, 0, 0) - AnyPool(team, q));
}

std::map<std::string, int> UsageTracker::GuaranteeLevels(const std::map<std::string, TimeMs>& since, TimeMs now,
                                                         DurationMs reclaim_after) const {
  std::map<std::string, int> levels;
  // Listed teams, and unlisted ones below the default team's guarantee or their equal share
  // (they are in `since`).
  std::set<std::string> teams;
  for (const auto& [team, q] : quotas_.teams) teams.insert(team);
  for (const auto& [team, t] : since) teams.insert(team);
  for (const std::string& team : teams) {
    const double guarantee = Guarantee(team);
    if (guarantee <= 0) continue;
    bool below = TeamTotal(team) < guarantee - 1e-9;
    auto it = since.find(team);
    bool long_below = below && it != since.end() && now - it->second >= reclaim_after;
    levels[team] = long_below ? 2 : below ? 1 : 0;
  }
  return levels;
}

std::map<std::string, int> GuaranteeTiers(const std::map<std::string, TimeMs>& since, TimeMs now,
                                          DurationMs reclaim_after) {
  std::map<std::string, int> tiers;
  for (const auto& [team, t] : since) tiers[team] = now - t >= reclaim_after ? 2 : 1;
  return tiers;
}

std::string UsageTracker::QuotaBlock(const JobSpec& spec, double share) const {
  if (!has_limits_) return "";
  const TeamQuota& q = quotas_.Team(spec.team);
  double held = TeamTotal(spec.team);
  if (q.max_gpus >= 0 && held + share > q.max_gpus + 1e-9) {
    return fmt::format("team {} is at its maximum: holds {:g} of {:g} GPUs", spec.team, held, q.max_gpus);
  }
  if (q.borrow_limit >= 0 && held + share > Guarantee(spec.team) + q.borrow_limit + 1e-9) {
    return fmt::format("team {} is at its borrowing limit: holds {:g} GPUs (guarantee {:g} + borrow limit {:g})",
                       spec.team, held, Guarantee(spec.team), q.borrow_limit);
  }
  auto project = q.project_max_gpus.find(spec.project);
  if (project != q.project_max_gpus.end()) {
    auto it = projects_.find(spec.team + "/" + spec.project);
    double used = it == projects_.end() ? 0 : it->second;
    if (used + share > project->second + 1e-9) {
      return fmt::format("project {} is at its limit: holds {:g} of {:g} GPUs", spec.project, used, project->second);
    }
  }
  double user_max = q.user_max_gpus >= 0 ? q.user_max_gpus : quotas_.user_max_gpus;
  if (user_max >= 0) {
    auto it = users_.find(spec.user);
    double used = it == users_.end() ? 0 : it->second;
    if (used + share > user_max + 1e-9) {
      return fmt::format("user {} is at the per-user limit: holds {:g} of {:g} GPUs", spec.user, used, user_max);
    }
  }
  return "";
}

}  // namespace gantry
