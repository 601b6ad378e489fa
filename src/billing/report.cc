// Usage aggregation and the monthly report.
#include "billing/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

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

nlohmann::json UsageLine::ToJson() const {
  nlohmann::json j = labels;
  j["gpu_seconds"] = RoundTo(gpu_ms / 1000, 3);
  j["gpu_hours"] = RoundTo(gpu_ms / kHourMs, 6);
  j["cost"] = RoundTo(cost, 6);  // csv, html and tables show cents
  double util = avg_util_pct();
  j["avg_utilization_pct"] = util < 0 ? nlohmann::json(nullptr) : nlohmann::json(RoundTo(util, 1));
  j["idle_cost"] = RoundTo(idle_cost, 6);
  return j;
}

namespace {

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

std::vector<UsageLine> Sorted(std::map<std::string, UsageLine>& groups) {
  std::vector<UsageLine> out;
  for (auto& [key, line] : groups) out.push_back(std::move(line));
  std::stable_sort(out.begin(), out.end(), [](const UsageLine& a, const UsageLine& b) { return a.cost > b.cost; });
  return out;
}

nlohmann::json LinesJson(const std::vector<UsageLine>& lines, size_t limit = SIZE_MAX) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < lines.size() && i < limit; ++i) out.push_back(lines[i].ToJson());
  return out;
}

}  // namespace

std::vector<UsageLine> AggregateUsage(const std::vector<Allocation>& allocations, TimeMs from, TimeMs to, TimeMs now,
                                      const PriceBook& prices, UsageGrouping by) {
  std::map<std::string, UsageLine> groups;
  for (const Allocation& a : allocations) {
    Accrual acc = Accrue(a, from, to, now, prices);
    if (acc.gpu_ms <= 0) continue;
    nlohmann::json labels = LabelsOf(a, by);
    UsageLine& line = groups[labels.dump()];
    line.labels = std::move(labels);
    line.Add(a, acc);
  }
  return Sorted(groups);
}

Expected<nlohmann::json> MonthlyReport(const std::vector<Allocation>& allocations, const Calendar& calendar,
                                       const PriceBook& prices, TimeMs now, const ReportOptions& options) {
  auto bounds = calendar.MonthBounds(options.month);
  if (!bounds) return bounds.status();
  auto [from, to] = *bounds;
  std::map<std::string, UsageLine> teams, projects, types, jobs;
  std::map<std::string, UsageLine> days;  // "YYYY-MM-DD"
  UsageLine total;
  for (const Allocation& a : allocations) {
    Accrual acc = Accrue(a, from, to, now, prices);
    if (acc.gpu_ms <= 0) continue;
    total.Add(a, acc);
    for (auto [groups, by] : {std::pair{&teams, UsageGrouping::kTeam},
                              {&projects, UsageGrouping::kProject},
                              {&types, UsageGrouping::kGpuType},
                              {&jobs, UsageGrouping::kJob}}) {
      nlohmann::json labels = LabelsOf(a, by);
      UsageLine& line = (*groups)[labels.dump()];
      line.labels = std::move(labels);
      line.Add(a, acc);
    }
    // Daily GPU-hours: the interval cut at each local midnight.
    TimeMs lo = std::max(a.start_ms, from), hi = std::min(a.EndOr(now), to);
    while (lo < hi) {
      TimeMs next = std::min(hi, calendar.NextDay(lo));
      std::string day = calendar.DayOf(lo);
      UsageLine& line = days[day];
      line.labels = {{"date", day}};
      line.Add(a, Accrue(a, lo, next, now, prices));
      lo = next;
    }
  }
  nlohmann::json daily = nlohmann::json::array();
  for (TimeMs d = from; d < to; d = calendar.NextDay(d)) {
    auto it = days.find(calendar.DayOf(d));
    if (it != days.end()) {
      daily.push_back(it->second.ToJson());
    } else {
      daily.push_back({{"date", calendar.DayOf(d)}, {"gpu_hours", 0.0}, {"cost", 0.0}});
    }
  }
  std::vector<UsageLine> job_lines = Sorted(jobs);
  nlohmann::json idle = nlohmann::json::array();
  for (const UsageLine& l : job_lines) {
    if (l.idle_flagged) idle.push_back(l.ToJson());
  }
  nlohmann::json totals = total.ToJson();
  totals["jobs"] = job_lines.size();
  return nlohmann::json{{"month", options.month},
                        {"timezone", calendar.zone_name()},
                        {"currency", options.currency},
                        {"from", FormatUtc(from)},
                        {"to", FormatUtc(to)},
                        {"complete", now >= to},
                        {"totals", totals},
                        {"teams", LinesJson(Sorted(teams))},
                        {"projects", LinesJson(Sorted(projects))},
                        {"gpu_types", LinesJson(Sorted(types))},
                        {"top_jobs", LinesJson(job_lines, static_cast<size_t>(options.top_jobs))},
                        {"idle_jobs", idle},
                        {"daily", daily}};
}

}  // namespace gantry
