// Accounting's read side: usage over a window and the monthly report with its
// reconciliation against the job event history (budgets and alerts are StateViews').
// Reports read the store on the caller's thread; only the open intervals are copied from
// the owner.
#include <fmt/format.h>

#include "billing/report.h"
#include "server/controller.h"

namespace gantry {

// The ledger as of now: the store's rows, with the open intervals' newest telemetry.
std::vector<Allocation> Controller::LedgerView(TimeMs from, TimeMs to) {
  std::map<std::tuple<std::string, int, int>, Allocation> open;
  View([&] {
    for (Allocation& a : state_.accounting().OpenRows()) open[{a.job_id, a.run, a.slot}] = std::move(a);
    return 0;
  });
  auto rows = store_->Allocations(from, to);
  std::vector<Allocation> out;
  if (!rows) return out;
  for (Allocation& a : *rows) {
    auto it = open.find({a.job_id, a.run, a.slot});
    out.push_back(a.open() && it != open.end() ? it->second : std::move(a));
  }
  return out;
}

void Controller::AddJobNames(nlohmann::json& lines) {
  View([&] {
    for (auto& l : lines) {
      if (l.contains("job_id")) l["name"] = state_.JobName(l["job_id"].get<std::string>());
    }
    return 0;
  });
}

Answer Controller::Usage(const Actor& who, const UsageQuery& q) {
  auto by = ParseUsageGrouping(q.by);
  if (!by) return by.status();
  if (q.to <= q.from) return Status::Invalid("to", "must be after from");
  std::string team = q.team;
  if (!who.admin()) {
    if (!team.empty() && team != who.team) return Status::Denied("team", "you see only your team");
    team = who.team;
  }
  std::vector<Allocation> rows = LedgerView(q.from, q.to);
  if (!team.empty()) std::erase_if(rows, [&](const Allocation& a) { return a.team != team; });
  TimeMs now = Now();
  nlohmann::json lines = nlohmann::json::array();
  UsageLine total;
  for (const UsageLine& l : AggregateUsage(rows, q.from, q.to, now, state_.accounting().prices(), *by)) {
    lines.push_back(l.ToJson());
    total.gpu_ms += l.gpu_ms;
    total.cost += l.cost;
    total.measured_gpu_ms += l.measured_gpu_ms;
    total.util_gpu_ms += l.util_gpu_ms;
    total.idle_cost += l.idle_cost;
  }
  if (q.by == "job") AddJobNames(lines);
  return nlohmann::json{{"from", FormatUtc(q.from)},
                        {"to", q.to == kNever ? FormatUtc(now) : FormatUtc(q.to)},
                        {"by", q.by},
                        {"team", team},
                        {"currency", options_.pricing.currency},
                        {"lines", lines},
                        {"total", total.ToJson()}};
}

Answer Controller::MonthlyReport(const Actor& who, const std::string& month) {
  auto bounds = state_.accounting().calendar().MonthBounds(month);
  if (!bounds) return bounds.status();
  std::vector<Allocation> rows = LedgerView(bounds->first, bounds->second);
  if (!who.admin()) std::erase_if(rows, [&](const Allocation& a) { return a.team != who.team; });
  TimeMs now = Now();
  auto report = gantry::MonthlyReport(rows, state_.accounting().calendar(), state_.accounting().prices(), now,
                                      {.month = month,
                                       .currency = options_.pricing.currency,
                                       .top_jobs = 10,
                                       .pricing = &options_.pricing,
                                       .on_demand_prices = &state_.accounting().on_demand_prices()});
  if (!report) return report.status();
  nlohmann::json budgets =
      View([&] { return month == state_.accounting().month() ? state_.BudgetStatus() : nlohmann::json::array(); });
  nlohmann::json mine = nlohmann::json::array();
  for (auto& b : budgets) {
    if (who.admin() || b["team"] == who.team) mine.push_back(std::move(b));
  }
  (*report)["budgets"] = std::move(mine);
  AddJobNames((*report)["top_jobs"]);
  AddJobNames((*report)["idle_jobs"]);
  // Reconciliation: the same GPU-seconds recomputed from the job event history alone.
  auto events = store_->EventsOfKinds({"started", "released"}, bounds->second);
  if (events) {
    std::map<std::pair<std::string, int>, std::pair<TimeMs, double>> started;  // job, run -> start, GPU share
    double from_events_ms = 0;
    auto clip = [&](TimeMs a, TimeMs b, double share) {
      TimeMs lo = std::max(a, bounds->first), hi = std::min(b, bounds->second);
      return hi > lo ? share * static_cast<double>(hi - lo) : 0.0;
    };
    std::set<std::string> teams_seen;
    for (const Allocation& a : rows) teams_seen.insert(a.team);
    for (const JobEvent& e : *events) {
      nlohmann::json d = nlohmann::json::parse(e.detail, nullptr, false);
      int run = d.value("run", 0);
      if (e.kind == "started") {
        double share = 0;
        for (const auto& node : d["placement"]) {
          for (const auto& g : node["gpus"]) share += g.value("share", 0.0);
        }
        started[{e.job_id, run}] = {e.ts_ms, share};
      } else {
        auto it = started.find({e.job_id, run});
        if (it == started.end()) continue;
        from_events_ms += clip(it->second.first, e.ts_ms, it->second.second);
        started.erase(it);
      }
    }
    for (const auto& [key, s] : started) from_events_ms += clip(s.first, std::min(now, bounds->second), s.second);
    double ledger_ms = 0;
    for (const Allocation& a : rows)
      ledger_ms += Accrue(a, bounds->first, bounds->second, now, state_.accounting().prices()).gpu_ms;
    if (who.admin()) {
      (*report)["reconciliation"] = {{"ledger_gpu_seconds", RoundTo(ledger_ms / 1000, 3)},
                                     {"event_history_gpu_seconds", RoundTo(from_events_ms / 1000, 3)},
                                     {"match", std::abs(ledger_ms - from_events_ms) < 1.0}};
    }
  }
  return std::move(*report);
}

}  // namespace gantry
