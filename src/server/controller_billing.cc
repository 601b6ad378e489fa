// Accounting on the controller's thread: a ledger interval per GPU share of every run
// (opened at the start decision, closed when the run's last process ended, as the agent
// reported it), telemetry averaged into the open intervals, this month's spend against
// team and project budgets (alerts at 80% and 100%, holds), per-job cost limits and idle
// jobs. The read side is in controller_reports.cc.
#include <fmt/format.h>

#include <iostream>

#include "server/controller.h"

namespace gantry {

namespace {

constexpr size_t kAlertsKept = 200;

std::string ProjectScope(const std::string& team, const std::string& project) { return team + "/" + project; }

}  // namespace

void Controller::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << FormatUtc(Now()) << " " << line << "\n";
  }
}

Status Controller::RecoverAccounting() {
  auto calendar = Calendar::ForZone(options_.pricing.timezone, "pricing.timezone");
  if (!calendar) return calendar.status();
  calendar_ = *calendar;
  auto configured = PriceBook::Build(options_.config.catalog, options_.pricing, calendar_);
  if (!configured) return configured.status();
  TimeMs now = Now();
  prices_ = *configured;
  // "price_book": the prices billed so far; "price_config": the configured book at the last
  // start (a warning is due only when the configuration changed since).
  std::string configured_text = configured->ToJson().dump();
  bool config_changed = meta_["price_config"] != configured_text;
  if (config_changed) batch_.meta["price_config"] = meta_["price_config"] = configured_text;
  auto recorded_text = meta_.find("price_book");
  if (recorded_text != meta_.end()) {
    auto recorded = PriceBook::FromJson(nlohmann::json::parse(recorded_text->second, nullptr, false));
    if (!recorded) return recorded.status();
    std::vector<std::string> retroactive;
    prices_ = PriceBook::Merge(*recorded, *configured, now, &retroactive);
    if (!config_changed) retroactive.clear();
    for (const std::string& key : retroactive) {
      Log(
          fmt::format("warning: the configured past prices of {} differ from those already billed; the change "
                      "applies from now ({}), not retroactively",
                      key, FormatUtc(now)));
    }
  }
  std::string book = prices_.ToJson().dump();
  if (recorded_text == meta_.end() || recorded_text->second != book) {
    meta_["price_book"] = book;
    batch_.meta["price_book"] = book;
  }
  auto alerts = meta_.find("alerts");
  if (alerts != meta_.end()) {
    nlohmann::json list = nlohmann::json::parse(alerts->second, nullptr, false);
    if (list.is_array()) alerts_ = std::move(list);
  }
  auto open = store_->OpenAllocations();
  if (!open) return open.status();
  for (Allocation& a : *open) {
    JobRecord* job = Find(a.job_id);
    bool current = job && job->runs == a.run && (job->state == JobState::kRunning || job->state == JobState::kStopping);
    if (current) {
      ledger_by_gpu_[{a.node, a.gpu_index}].insert(a.job_id);
      ledger_open_[a.job_id].push_back({std::move(a), -1, -1});
    } else {  // cannot happen with one transaction per change; never leave an interval open forever
      a.end_ms = job && job->end_ms >= a.start_ms ? job->end_ms : now;
      batch_.allocations.push_back(a);
    }
  }
  ledger_flushed_ms_ = now;
  SetMonth(now);
  return Status::Ok();
}

// The budget month: this month's closed intervals from the store, and the alerts sent.
void Controller::SetMonth(TimeMs now) {
  month_ = calendar_.MonthOf(now);
  month_from_ = calendar_.MonthStart(now);
  month_to_ = calendar_.NextMonth(now);
  month_closed_.clear();
  budget_alerts_.clear();
  auto rows = store_->Allocations(month_from_, month_to_);
  if (rows) {
    for (const Allocation& a : *rows) {
      if (a.open()) continue;
      Accrual acc = Accrue(a, month_from_, month_to_, now, prices_);
      for (const std::string& scope : {a.team, ProjectScope(a.team, a.project)}) {
        month_closed_[scope].gpu_ms += acc.gpu_ms;
        month_closed_[scope].cost += acc.cost;
      }
    }
  }
  std::string prefix = "budget_alert/" + month_ + "/";
  for (auto it = meta_.lower_bound(prefix); it != meta_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    budget_alerts_[it->first.substr(prefix.size())] = std::atoi(it->second.c_str());
  }
}

void Controller::OpenLedger(const JobRecord& job) {
  const GpuCatalog& catalog = options_.config.catalog;
  const std::string pool_label = options_.pricing.pool_label;
  std::vector<LedgerEntry>& entries = ledger_open_[job.spec->id];
  entries.clear();
  int slot = 0;
  for (const NodeShare& ns : job.placement.nodes) {
    const Node& node = snap_.nodes[ns.node];
    const GpuType& type = catalog.Get(node.gpu_type());
    auto pool = node.labels.find(pool_label);
    for (const GpuShare& g : ns.gpus) {
      Allocation a;
      a.job_id = job.spec->id;
      a.run = job.runs;
      a.slot = slot++;
      a.user = job.spec->user;
      a.team = job.spec->team;
      a.project = job.spec->project;
      a.priority_class = job.spec->priority_class;
      a.node = node.id;
      a.pool = pool == node.labels.end() ? "" : pool->second;
      a.gpu_index = g.gpu;
      a.gpu_uuid = node.gpus[g.gpu].uuid;
      a.gpu_type = type.name;
      if (g.mig_profile >= 0) a.mig_profile = type.mig_profiles[g.mig_profile].name;
      a.share = ShareOfGpu(g, type);
      a.start_ms = job.start_ms;
      batch_.allocations.push_back(a);
      ledger_by_gpu_[{a.node, a.gpu_index}].insert(a.job_id);
      entries.push_back({std::move(a), -1, -1});
    }
  }
}

void Controller::CloseLedger(JobRecord& job, TimeMs end_ms) {
  auto it = ledger_open_.find(job.spec->id);
  if (it == ledger_open_.end()) return;
  double gpu_ms = 0;
  for (LedgerEntry& e : it->second) {
    Allocation& a = e.row;
    a.end_ms = std::max(end_ms, a.start_ms);
    a.idle = a.idle || job.idle_flagged;
    Accrual all = Accrue(a, kBeginningOfTime, kNever, a.end_ms, prices_);
    job.closed_cost += all.cost;
    gpu_ms += all.gpu_ms;
    Accrual in_month = Accrue(a, month_from_, month_to_, a.end_ms, prices_);
    for (const std::string& scope : {a.team, ProjectScope(a.team, a.project)}) {
      month_closed_[scope].gpu_ms += in_month.gpu_ms;
      month_closed_[scope].cost += in_month.cost;
    }
    batch_.allocations.push_back(a);
    auto on_gpu = ledger_by_gpu_.find({a.node, a.gpu_index});
    if (on_gpu != ledger_by_gpu_.end()) {
      on_gpu->second.erase(a.job_id);
      if (on_gpu->second.empty()) ledger_by_gpu_.erase(on_gpu);
    }
  }
  Event(job, "released", {{"run", job.runs}, {"gpu_seconds", gpu_ms / 1000}, {"cost", RoundTo(job.closed_cost, 6)}},
        std::max(end_ms, job.start_ms));
  ledger_open_.erase(it);
  ledger_dirty_.erase(job.spec->id);
  job.idle_flagged = false;
}

// One reading of one GPU, added to the open intervals on it. On a shared GPU each job gets
// what its own processes used where the provider tells per-process figures.
void Controller::LedgerTelemetry(int node, int gpu, const GpuSample& sample) {
  const std::string& node_id = snap_.nodes[node].id;
  auto jobs = ledger_by_gpu_.find({node_id, gpu});
  if (jobs == ledger_by_gpu_.end()) return;
  for (const std::string& job_id : jobs->second) {
    auto it = ledger_open_.find(job_id);
    if (it == ledger_open_.end()) continue;
    for (LedgerEntry& e : it->second) {
      if (e.row.node != node_id || e.row.gpu_index != gpu) continue;
      double util = -1, mem = 0;
      bool own = false;
      for (const GpuProcess& p : sample.processes) {
        if (p.job_id != job_id) continue;
        own = true;
        mem += static_cast<double>(std::max<int64_t>(0, p.used_memory_mib));
        if (p.sm_util >= 0) util = std::max(0.0, util) + p.sm_util;
      }
      if (util < 0) util = sample.util_pct;  // no per-process figure: the GPU's
      if (!own && e.row.share >= 1 && sample.mem_used_mib >= 0) mem = static_cast<double>(sample.mem_used_mib);
      if (util < 0) continue;
      e.row.util_sum += std::min(util, 100.0);
      e.row.mem_sum_mib += mem;
      e.row.samples++;
      e.last_util = std::min(util, 100.0);
      if (e.last_util >= quotas_->accounting.idle_threshold_pct) {
        e.below_since = -1;
      } else if (e.below_since < 0) {
        e.below_since = Now();
      }
      ledger_dirty_.insert(job_id);
    }
  }
}

double Controller::JobCost(const JobRecord& job, TimeMs now) const {
  double cost = job.closed_cost;
  auto it = ledger_open_.find(job.spec->id);
  if (it != ledger_open_.end()) {
    for (const LedgerEntry& e : it->second) cost += Accrue(e.row, kBeginningOfTime, kNever, now, prices_).cost;
  }
  return cost;
}

void Controller::Alert(const std::string& kind, const std::string& team, const std::string& message,
                       nlohmann::json detail) {
  TimeMs now = Now();
  detail["kind"] = kind;
  detail["team"] = team;
  detail["message"] = message;
  detail["time"] = FormatUtc(now);
  Log("alert: " + message);
  counters_["alert_" + kind]++;
  alerts_.push_back(detail);
  if (alerts_.size() > kAlertsKept) alerts_.erase(alerts_.begin());
  batch_.meta["alerts"] = meta_["alerts"] = alerts_.dump(-1, ' ', false, kReplaceBadUtf8);
  const TeamQuota& q = quotas_->Team(team);
  std::string url = q.webhook.empty() ? quotas_->accounting.webhook : q.webhook;
  if (!url.empty()) {
    outbox_.push_back([this, url, detail = std::move(detail)]() mutable { notifier_.Post(url, std::move(detail)); });
  }
}

void Controller::AccountingTick() {
  TimeMs now = Now();
  if (now >= month_to_) {
    SetMonth(now);
    snap_.holds.clear();
  }
  if (now - ledger_flushed_ms_ >= options_.ledger_flush_ms) {
    for (const std::string& id : ledger_dirty_) {
      for (const LedgerEntry& e : ledger_open_[id]) batch_.allocations.push_back(e.row);
    }
    ledger_dirty_.clear();
    ledger_flushed_ms_ = now;
  }
  CheckBudgets(now);
  CheckJobs(now);
}

// This month's use of every budget: closed intervals plus the open ones up to now.
nlohmann::json Controller::BudgetStatus(TimeMs now) const {
  std::map<std::string, Accrual> used = month_closed_;
  for (const auto& [id, entries] : ledger_open_) {
    for (const LedgerEntry& e : entries) {
      Accrual acc = Accrue(e.row, month_from_, month_to_, now, prices_);
      for (const std::string& scope : {e.row.team, ProjectScope(e.row.team, e.row.project)}) {
        used[scope].gpu_ms += acc.gpu_ms;
        used[scope].cost += acc.cost;
      }
    }
  }
  nlohmann::json out = nlohmann::json::array();
  auto add = [&](const std::string& scope, const std::string& team, const std::string& project, const Budget& b) {
    Accrual u = used.count(scope) ? used.at(scope) : Accrual{};
    double gpu_hours = u.gpu_ms / kHourMs;
    double ratio = 0;
    if (b.monthly_cost > 0) ratio = std::max(ratio, u.cost / b.monthly_cost);
    if (b.monthly_gpu_hours > 0) ratio = std::max(ratio, gpu_hours / b.monthly_gpu_hours);
    nlohmann::json limit = nlohmann::json::object();
    if (b.monthly_cost > 0) limit["cost"] = b.monthly_cost;
    if (b.monthly_gpu_hours > 0) limit["gpu_hours"] = b.monthly_gpu_hours;
    int level = ratio >= 1 ? 100 : ratio >= 0.8 ? 80 : 0;
    out.push_back({{"scope", scope},
                   {"team", team},
                   {"project", project},
                   {"month", month_},
                   {"limit", limit},
                   {"used", {{"cost", RoundTo(u.cost, 2)}, {"gpu_hours", RoundTo(gpu_hours, 6)}}},
                   {"used_pct", RoundTo(100 * ratio, 2)},
                   {"level", level},
                   {"on_exceed", b.hold ? "hold" : "alert"},
                   {"held", b.hold && level >= 100}});
  };
  for (const auto& [team, q] : quotas_->teams) {
    if (q.budget.set()) add(team, team, "", q.budget);
    for (const auto& [project, b] : q.project_budgets) add(ProjectScope(team, project), team, project, b);
  }
  return out;
}

void Controller::CheckBudgets(TimeMs now) {
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
  for (const nlohmann::json& b : BudgetStatus(now)) {
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
          month_, what, used, month_);
    }
    int& sent = budget_alerts_[scope];
    if (level > sent) {
      sent = level;
      batch_.meta["budget_alert/" + month_ + "/" + scope] = meta_["budget_alert/" + month_ + "/" + scope] =
          std::to_string(level);
      Alert(level >= 100 ? "budget_exceeded" : "budget_warning", team,
            fmt::format("{} has used {} of its {} budget{}", what, used, month_,
                        level >= 100 && b["held"].get<bool>() ? "; its new jobs are held" : ""),
            b);
    }
  }
  if (holds != snap_.holds) {
    snap_.holds = std::move(holds);
    dirty_ = true;
  }
}

void Controller::CheckJobs(TimeMs now) {
  const AccountingPolicy& policy = quotas_->accounting;
  std::vector<std::string> ids;
  for (const auto& [id, entries] : ledger_open_) ids.push_back(id);
  for (const std::string& id : ids) {
    JobRecord* job = Find(id);
    if (!job) continue;
    const JobSpec& spec = *job->spec;
    if (spec.cost_limit > 0 && job->cost_alert < 100) {
      double cost = JobCost(*job, now);
      int level = cost >= spec.cost_limit ? 100 : cost >= 0.8 * spec.cost_limit ? 80 : 0;
      if (level > job->cost_alert) {
        job->cost_alert = level;
        Dirty(*job);
        bool exempt = policy.CostLimitExempt(spec.priority_class);
        bool stop = level >= 100 && !exempt && job->state == JobState::kRunning;
        std::string message = fmt::format("job {} has cost {} {} of its limit {}{}", id, FormatAmount(cost),
                                          options_.pricing.currency, FormatAmount(spec.cost_limit),
                                          level < 100 ? ""
                                          : stop      ? "; it is stopped"
                                                      : " (its class may overrun; it goes on)");
        Event(*job, "cost_alert", {{"cost", RoundTo(cost, 2)}, {"limit", spec.cost_limit}, {"level", level}});
        Alert(level >= 100 ? "job_cost_limit" : "job_cost_warning", spec.team, message,
              {{"job_id", id}, {"user", spec.user}, {"cost", RoundTo(cost, 2)}, {"limit", spec.cost_limit}});
        if (stop) {
          StopRunning(*job, StopCause::kCostLimit,
                      fmt::format("cost limit {} {} reached", FormatAmount(spec.cost_limit), options_.pricing.currency),
                      options_.config.scheduler.grace_period_ms);
        }
      }
    }
    // Idle: every share's readings under the threshold since `since`.
    double util = -1;
    TimeMs since = -1;
    bool busy = false;
    for (const LedgerEntry& e : ledger_open_[id]) {
      util = std::max(util, e.last_util);
      busy = busy || e.below_since < 0;
      since = std::max(since, e.below_since);
    }
    if (util < 0) continue;  // no telemetry yet
    if (busy) {
      if (job->idle_flagged) {
        job->idle_flagged = false;
        Event(*job, "busy", {{"util_pct", util}});
        Dirty(*job);
      }
      continue;
    }
    if (job->idle_flagged || now - since < policy.idle_after_ms || job->state != JobState::kRunning) continue;
    job->idle_flagged = true;
    for (LedgerEntry& e : ledger_open_[id]) e.row.idle = true;
    ledger_dirty_.insert(id);
    Dirty(*job);
    bool stop = quotas_->Team(spec.team).idle_action == IdleAction::kStop;
    std::string message = fmt::format("job {} of {} has held its GPUs under {:g}% utilization for {}{}", id, spec.user,
                                      policy.idle_threshold_pct, FormatDuration(now - since),
                                      stop ? "; it is stopped (team policy)" : "");
    Event(*job, "idle", {{"since", FormatUtc(since)}, {"util_pct", util}});
    Alert("job_idle", spec.team, message, {{"job_id", id}, {"user", spec.user}, {"since", FormatUtc(since)}});
    if (stop) {
      StopRunning(*job, StopCause::kIdle,
                  fmt::format("idle: GPUs under {:g}% for {}", policy.idle_threshold_pct, FormatDuration(now - since)),
                  options_.config.scheduler.grace_period_ms);
    }
  }
}

}  // namespace gantry
