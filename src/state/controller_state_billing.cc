// What follows from the accounting on the controller's thread: recovery of the ledger,
// the released event of a run, alerts (logged, kept, sent as webhooks), budget holds at
// 100%, per-job cost limits and idle jobs. The ledger itself is Accounting
// (accounting.h); the read side is server/controller_reports.cc and StateViews' budgets
// and alerts.
#include <fmt/format.h>

#include "billing/report.h"
#include "state/controller_state.h"

namespace gantry {

Status ControllerState::RecoverAccounting(std::vector<Allocation> open) {
  TimeMs now = now_;
  std::vector<std::string> retroactive;
  Status s = accounting_.Configure(options_.config.catalog, options_.pricing, meta_, batch_, now, &retroactive);
  if (!s.ok()) return s;
  for (const std::string& key : retroactive) {
    log_(
        fmt::format("warning: the configured past prices of {} differ from those already billed; the change "
                    "applies from now ({}), not retroactively",
                    key, FormatUtc(now)));
  }
  accounting_.LoadAlerts(meta_);
  for (Allocation& a : open) {
    JobRecord* job = Find(a.job_id);
    bool current = job && job->runs == a.run && (job->state == JobState::kRunning || job->state == JobState::kStopping);
    if (current) {
      accounting_.Adopt(std::move(a));
    } else {  // cannot happen with one transaction per change; never leave an interval open forever
      a.end_ms = job && job->end_ms >= a.start_ms ? job->end_ms : now;
      batch_.allocations.push_back(a);
    }
  }
  return Status::Ok();
}

// The budget month: this month's closed intervals, and the alerts sent. A new month
// lifts the holds of the last one.
void ControllerState::StartMonth(const std::vector<Allocation>& month_rows) {
  accounting_.StartMonth(now_, month_rows, meta_);
  if (!snap_.holds.empty()) {
    snap_.holds.clear();
    dirty_ = true;
  }
}

void ControllerState::OpenLedger(const JobRecord& job, const Placement& placement) {
  accounting_.Open(job, placement, snap_.nodes, options_.config.catalog, options_.pricing.pool_label, batch_);
}

void ControllerState::CloseLedger(JobRecord& job, TimeMs end_ms) {
  double gpu_ms = accounting_.Close(job, end_ms, batch_);
  if (gpu_ms < 0) return;
  Event(job, "released", {{"run", job.runs}, {"gpu_seconds", gpu_ms / 1000}, {"cost", RoundTo(job.closed_cost, 6)}},
        std::max(end_ms, job.start_ms));
  job.idle_flagged = false;
}

void ControllerState::Alert(const std::string& kind, const std::string& team, const std::string& message,
                            nlohmann::json detail) {
  detail["kind"] = kind;
  detail["team"] = team;
  detail["message"] = message;
  detail["time"] = FormatUtc(now_);
  log_("alert: " + message);
  counters_["alert_" + kind]++;
  accounting_.AddAlert(detail, meta_, batch_);
  const TeamQuota& q = quotas_->Team(team);
  std::string url = q.webhook.empty() ? quotas_->accounting.webhook : q.webhook;
  if (!url.empty()) {
    effects_.webhooks.push_back({url, std::move(detail), "", ""});
  }
}

void ControllerState::AccountingTick() {
  TimeMs now = now_;
  accounting_.Flush(now, options_.ledger_flush_ms, batch_);
  CheckBudgets(now);
  CheckJobs(now);
}

void ControllerState::CheckBudgets(TimeMs now) {
  std::map<std::string, std::string> holds;
  bool any = false;
  for (const auto& [team, q] : quotas_->teams) any = any || q.budget.set() || !q.project_budgets.empty();
  if (!any) {
    if (!snap_.holds.empty()) {
      snap_.holds.clear();
      dirty_ = true;
    }
    return;
  }
  const std::string& month = accounting_.month();
  for (const nlohmann::json& b : accounting_.BudgetStatus(*quotas_, now)) {
    std::string scope = b["scope"];
    std::string team = b["team"];
    std::string project = b["project"];
    int level = b["level"];
    std::string what = project.empty() ? "team " + team : "project " + scope;
    std::string used = fmt::format("{:.1f}%", b["used_pct"].get<double>());
    if (b["held"].get<bool>()) {
      holds[scope] = fmt::format(
          "the {} budget of {} is spent ({} used in {}); new jobs wait for next month or a "
          "higher budget",
          month, what, used, month);
    }
    if (level > accounting_.BudgetAlertSent(scope)) {
      accounting_.SetBudgetAlertSent(scope, level, meta_, batch_);
      Alert(level >= 100 ? "budget_exceeded" : "budget_warning", team,
            fmt::format("{} has used {} of its {} budget{}", what, used, month,
                        level >= 100 && b["held"].get<bool>() ? "; its new jobs are held" : ""),
            b);
    }
  }
  if (holds != snap_.holds) {
    snap_.holds = std::move(holds);
    dirty_ = true;
  }
}

void ControllerState::CheckJobs(TimeMs now) {
  for (const std::string& id : accounting_.OpenJobs()) {
    JobRecord* job = Find(id);
    if (!job) continue;
    CheckCostLimit(*job, now);
    CheckIdle(*job, now);
  }
}

void ControllerState::CheckCostLimit(JobRecord& job, TimeMs now) {
  const JobSpec& spec = *job.spec;
  if (spec.cost_limit <= 0 || job.cost_alert >= 100) return;
  double cost = accounting_.JobCost(job, now);
  int level = cost >= spec.cost_limit ? 100 : cost >= 0.8 * spec.cost_limit ? 80 : 0;
  if (level <= job.cost_alert) return;
  job.cost_alert = level;
  Dirty(job);
  bool exempt = quotas_->accounting.CostLimitExempt(spec.priority_class);
  bool stop = level >= 100 && !exempt && job.state == JobState::kRunning;
  const std::string& id = spec.id;
  std::string message = fmt::format("job {} has cost {} {} of its limit {}{}", id, FormatAmount(cost),
                                    options_.pricing.currency, FormatAmount(spec.cost_limit),
                                    level < 100 ? ""
                                    : stop      ? "; it is stopped"
                                                : " (its class may overrun; it goes on)");
  Event(job, "cost_alert", {{"cost", RoundTo(cost, 2)}, {"limit", spec.cost_limit}, {"level", level}});
  Alert(level >= 100 ? "job_cost_limit" : "job_cost_warning", spec.team, message,
        {{"job_id", id}, {"user", spec.user}, {"cost", RoundTo(cost, 2)}, {"limit", spec.cost_limit}});
  if (stop) {
    StopRunning(job, StopCause::kCostLimit,
                fmt::format("cost limit {} {} reached", FormatAmount(spec.cost_limit), options_.pricing.currency),
                options_.config.scheduler.grace_period_ms);
  }
}

// Idle: every share's readings under the threshold for the policy's time.
void ControllerState::CheckIdle(JobRecord& job, TimeMs now) {
  const AccountingPolicy& policy = quotas_->accounting;
  const JobSpec& spec = *job.spec;
  Accounting::IdleState idle = accounting_.Idle(spec.id);
  if (idle.util < 0) return;  // no telemetry yet
  if (idle.busy) {
    if (job.idle_flagged) {
      job.idle_flagged = false;
      Event(job, "busy", {{"util_pct", idle.util}});
      Dirty(job);
    }
    return;
  }
  if (job.idle_flagged || now - idle.since < policy.idle_after_ms || job.state != JobState::kRunning) return;
  job.idle_flagged = true;
  accounting_.MarkIdle(spec.id);
  Dirty(job);
  bool stop = quotas_->Team(spec.team).idle_action == IdleAction::kStop;
  std::string message = fmt::format("job {} of {} has held its GPUs under {:g}% utilization for {}{}", spec.id,
                                    spec.user, policy.idle_threshold_pct, FormatDuration(now - idle.since),
                                    stop ? "; it is stopped (team policy)" : "");
  Event(job, "idle", {{"since", FormatUtc(idle.since)}, {"util_pct", idle.util}});
  Alert("job_idle", spec.team, message, {{"job_id", spec.id}, {"user", spec.user}, {"since", FormatUtc(idle.since)}});
  if (stop) {
    StopRunning(
        job, StopCause::kIdle,
        fmt::format("idle: GPUs under {:g}% for {}", policy.idle_threshold_pct, FormatDuration(now - idle.since)),
        options_.config.scheduler.grace_period_ms);
  }
}

void ControllerState::WriteBillingMetrics(MetricsWriter& w) const {
  TimeMs now = now_;
  nlohmann::json budgets = accounting_.BudgetStatus(*quotas_, now);
  w.Family("gantry_budget_used_ratio", "gauge", "This month's use of each budget (1 = spent)");
  for (const auto& b : budgets) {
    w.Sample("gantry_budget_used_ratio", {{"team", b["team"]}, {"project", b["project"]}},
             b["used_pct"].get<double>() / 100);
  }
  w.Family("gantry_budget_held", "gauge", "1 while a spent budget holds its team's or project's new jobs");
  for (const auto& b : budgets) {
    w.Sample("gantry_budget_held", {{"team", b["team"]}, {"project", b["project"]}}, b["held"].get<bool>() ? 1 : 0);
  }
  std::map<std::string, Accrual> team_month = accounting_.TeamMonth(now);
  w.Family("gantry_month_cost", "gauge", "Cost of GPUs held this month, by team (pricing currency)");
  w.Family("gantry_month_gpu_seconds", "gauge", "GPU time held this month, by team (seconds: Prometheus' base unit)");
  for (const auto& [scope, acc] : team_month) {
    if (scope.find('/') != std::string::npos) continue;
    w.Sample("gantry_month_cost", {{"team", scope}, {"currency", options_.pricing.currency}}, RoundTo(acc.cost, 4));
    w.Sample("gantry_month_gpu_seconds", {{"team", scope}}, acc.gpu_ms / 1000.0);
  }
  w.Family("gantry_job_idle", "gauge", "1 for a running job flagged idle (GPUs under the threshold)");
  for (const std::string& id : accounting_.OpenJobs()) {
    const JobRecord* job = Find(id);
    if (job && job->idle_flagged) {
      w.Sample("gantry_job_idle", {{"job", id}, {"team", job->spec->team}, {"user", job->spec->user}}, 1);
    }
  }
}

}  // namespace gantry
