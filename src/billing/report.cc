// Usage aggregation and the monthly report.
#include "billing/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

namespace gantry {

Expected<UsageGrouping> ParseUsageGrouping(const std::string& text) {
  if (text == "team") return UsageGrouping::kTeam;
  if (text == "project") return UsageGrouping::kProject;
  if (text == "user") return UsageGrouping::kUser;
  if (text == "gpu_type") return UsageGrouping::kGpuType;
  if (text == "job") return UsageGrouping::kJob;
  return Status::Invalid("by", "must be team, project, user, gpu_type or job");
}

double RoundTo(double x, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}

std::string FormatAmount(double x) { return std::abs(x) < 1 ? fmt::format("{:.4f}", x) : fmt::format("{:.2f}", x); }

void UsageLine::Add(const Allocation& a, const Accrual& acc) {
  gpu_ms += acc.gpu_ms;
  cost += acc.cost;
  if (a.samples > 0) {
    double util = std::clamp(a.avg_util() / 100.0, 0.0, 1.0);
    measured_gpu_ms += acc.gpu_ms;
    util_gpu_ms += acc.gpu_ms * util;
    idle_cost += acc.cost * (1 - util);
  }
  idle_flagged = idle_flagged || a.idle;
}

nlohmann::json LabelsOf(const Allocation& a, UsageGrouping by);

nlohmann::json UsageLine::ToJson() const {
  nlohmann::json j = sample && labels.is_null() ? LabelsOf(*sample, by) : labels;
  j["gpu_seconds"] = RoundTo(gpu_ms / 1000, 3);
  j["gpu_hours"] = RoundTo(gpu_ms / kHourMs, 6);
  j["cost"] = RoundTo(cost, 6);  // csv, html and tables show cents
  double util = avg_util_pct();
  j["avg_utilization_pct"] = util < 0 ? nlohmann::json(nullptr) : nlohmann::json(RoundTo(util, 1));
  j["idle_cost"] = RoundTo(idle_cost, 6);
  return j;
}

nlohmann::json LabelsOf(const Allocation& a, UsageGrouping by) {
  switch (by) {
    case UsageGrouping::kTeam: return {{"team", a.team}};
    case UsageGrouping::kProject: return {{"team", a.team}, {"project", a.project}};
    case UsageGrouping::kUser: return {{"team", a.team}, {"user", a.user}};
    case UsageGrouping::kGpuType: return {{"gpu_type", a.gpu_type}};
    case UsageGrouping::kJob: return {{"job_id", a.job_id}, {"team", a.team}, {"project", a.project}, {"user", a.user}};
  }
  return {};
}

namespace {

// Lines keyed by their labels, in a hash map that builds a line's JSON labels once, when
// the group first appears (the per-row cost is one key string).
class Groups {
 public:
  explicit Groups(UsageGrouping by) : by_(by) {}
  UsageLine& Of(const Allocation& a) {
    key_.clear();
    switch (by_) {
      case UsageGrouping::kTeam: key_ = a.team; break;
      case UsageGrouping::kProject: (key_ = a.team) += '\x1f', key_ += a.project; break;
      case UsageGrouping::kUser: (key_ = a.team) += '\x1f', key_ += a.user; break;
      case UsageGrouping::kGpuType: key_ = a.gpu_type; break;
      case UsageGrouping::kJob: key_ = a.job_id; break;
    }
    auto [it, fresh] = index_.try_emplace(key_, lines_.size());
    if (fresh) {
      lines_.emplace_back();
      lines_.back().sample = &a;
      lines_.back().by = by_;
    }
    return lines_[it->second];
  }
  // The lines, most expensive first.
  std::vector<UsageLine> Sorted() && {
    std::stable_sort(lines_.begin(), lines_.end(),
                     [](const UsageLine& x, const UsageLine& y) { return x.cost > y.cost; });
    return std::move(lines_);
  }

 private:
  UsageGrouping by_;
  std::string key_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<UsageLine> lines_;
};

nlohmann::json LinesJson(const std::vector<UsageLine>& lines, size_t limit = SIZE_MAX) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < lines.size() && i < limit; ++i) out.push_back(lines[i].ToJson());
  return out;
}

}  // namespace

std::vector<UsageLine> AggregateUsage(const std::vector<Allocation>& allocations, TimeMs from, TimeMs to, TimeMs now,
                                      const PriceBook& prices, UsageGrouping by) {
  Groups groups(by);
  for (const Allocation& a : allocations) {
    Accrual acc = Accrue(a, from, to, now, prices);
    if (acc.gpu_ms > 0) groups.Of(a).Add(a, acc);
  }
  return std::move(groups).Sorted();
}

Expected<nlohmann::json> MonthlyReport(const std::vector<Allocation>& allocations, const Calendar& calendar,
                                       const PriceBook& prices, TimeMs now, const ReportOptions& options) {
  auto bounds = calendar.MonthBounds(options.month);
  if (!bounds) return bounds.status();
  auto [from, to] = *bounds;
  Groups teams(UsageGrouping::kTeam), projects(UsageGrouping::kProject), types(UsageGrouping::kGpuType),
      jobs(UsageGrouping::kJob);
  // The local midnights of the month, computed once; each interval is cut at them.
  std::vector<TimeMs> midnights;
  for (TimeMs d = from; d < to; d = calendar.NextDay(d)) midnights.push_back(d);
  std::vector<UsageLine> days(midnights.size());
  for (size_t i = 0; i < days.size(); ++i) days[i].labels = {{"date", calendar.DayOf(midnights[i])}};
  midnights.push_back(to);
  UsageLine total;
  // On-demand and spot, by the pool's rate; what the spot hours would cost at list prices.
  UsageLine capacity[2];
  double spot_at_list = 0;
  for (const Allocation& a : allocations) {
    Accrual acc = Accrue(a, from, to, now, prices);
    if (acc.gpu_ms <= 0) continue;
    total.Add(a, acc);
    if (options.pricing && options.on_demand_prices) {
      const bool spot = options.pricing->RateOf(a.pool) == PriceRate::kSpot;
      capacity[spot].Add(a, acc);
      if (spot) spot_at_list += Accrue(a, from, to, now, *options.on_demand_prices).cost;
    }
    for (Groups* g : {&teams, &projects, &types, &jobs}) g->Of(a).Add(a, acc);
    TimeMs lo = std::max(a.start_ms, from), hi = std::min(a.EndOr(now), to);
    size_t day = static_cast<size_t>(std::upper_bound(midnights.begin(), midnights.end(), lo) - midnights.begin()) - 1;
    for (; day < days.size() && midnights[day] < hi; ++day) {
      days[day].Add(a, Accrue(a, std::max(lo, midnights[day]), std::min(hi, midnights[day + 1]), now, prices));
    }
  }
  nlohmann::json daily = nlohmann::json::array();
  for (const UsageLine& d : days) daily.push_back(d.ToJson());
  std::vector<UsageLine> job_lines = std::move(jobs).Sorted();
  nlohmann::json idle = nlohmann::json::array();
  for (const UsageLine& l : job_lines) {
    if (l.idle_flagged) idle.push_back(l.ToJson());
  }
  nlohmann::json totals = total.ToJson();
  totals["jobs"] = job_lines.size();
  nlohmann::json by_capacity = nlohmann::json::array();
  if (options.pricing && options.on_demand_prices) {
    for (int spot : {0, 1}) {
      capacity[spot].labels = {{"capacity", spot ? "spot" : "on_demand"}};
      nlohmann::json line = capacity[spot].ToJson();
      if (spot) {
        line["cost_at_on_demand_prices"] = RoundTo(spot_at_list, 6);
        line["saving"] = RoundTo(spot_at_list - capacity[1].cost, 6);
      }
      by_capacity.push_back(std::move(line));
    }
  }
  return nlohmann::json{{"month", options.month},
                        {"timezone", calendar.zone_name()},
                        {"currency", options.currency},
                        {"from", FormatUtc(from)},
                        {"to", FormatUtc(to)},
                        {"complete", now >= to},
                        {"totals", totals},
                        {"teams", LinesJson(std::move(teams).Sorted())},
                        {"projects", LinesJson(std::move(projects).Sorted())},
                        {"gpu_types", LinesJson(std::move(types).Sorted())},
                        {"capacity", by_capacity},
                        {"top_jobs", LinesJson(job_lines, static_cast<size_t>(options.top_jobs))},
                        {"idle_jobs", idle},
                        {"daily", daily}};
}

}  // namespace gantry
