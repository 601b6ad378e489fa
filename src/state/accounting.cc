// The ledger's state and arithmetic on the controller's thread.
#include "state/accounting.h"

#include <algorithm>
#include <cmath>

#include "billing/report.h"

namespace gantry {

namespace {

constexpr size_t kAlertsKept = 200;

std::string ProjectScope(const std::string& team, const std::string& project) { return team + "/" + project; }

}  // namespace

Status Accounting::Configure(const GpuCatalog& catalog, const PricingConfig& pricing,
                             std::map<std::string, std::string>& meta, StoreBatch& batch, TimeMs now,
                             std::vector<std::string>* warnings) {
  auto calendar = Calendar::ForZone(pricing.timezone, "pricing.timezone");
  if (!calendar) return calendar.status();
  calendar_ = *calendar;
  auto configured = PriceBook::Build(catalog, pricing, calendar_);
  if (!configured) return configured.status();
  prices_ = *configured;
  PricingConfig list = pricing;
  list.rate = PriceRate::kOnDemand;
  list.pools.clear();
  auto on_demand = PriceBook::Build(catalog, list, calendar_);
  if (!on_demand) return on_demand.status();
  on_demand_prices_ = std::move(*on_demand);
  // "price_book": the prices billed so far; "price_config": the configured book at the last
  // start (a warning is due only when the configuration changed since).
  std::string configured_text = configured->ToJson().dump(-1, ' ', false, kReplaceBadUtf8);
  bool config_changed = meta["price_config"] != configured_text;
  if (config_changed) batch.meta["price_config"] = meta["price_config"] = configured_text;
  auto recorded_text = meta.find("price_book");
  if (recorded_text != meta.end()) {
    auto recorded = PriceBook::FromJson(nlohmann::json::parse(recorded_text->second, nullptr, false));
    if (!recorded) return recorded.status();
    std::vector<std::string> retroactive;
    prices_ = PriceBook::Merge(*recorded, *configured, now, &retroactive);
    if (config_changed) warnings->insert(warnings->end(), retroactive.begin(), retroactive.end());
  }
  std::string book = prices_.ToJson().dump(-1, ' ', false, kReplaceBadUtf8);
  if (recorded_text == meta.end() || recorded_text->second != book) {
    meta["price_book"] = book;
    batch.meta["price_book"] = book;
  }
  flushed_ms_ = now;
  return Status::Ok();
}

void Accounting::Adopt(Allocation open) {
  by_gpu_[{open.node, open.gpu_index}].insert(open.job_id);
  std::string job_id = open.job_id;
  open_[job_id].push_back({std::move(open), -1, -1});
}

void Accounting::StartMonth(TimeMs now, const std::vector<Allocation>& month_rows,
                            const std::map<std::string, std::string>& meta) {
  month_ = calendar_.MonthOf(now);
  month_from_ = calendar_.MonthStart(now);
  month_to_ = calendar_.NextMonth(now);
  month_closed_.clear();
  budget_alerts_.clear();
  for (const Allocation& a : month_rows) {
    if (!a.open()) AddToMonth(a, Accrue(a, month_from_, month_to_, now, prices_));
  }
  std::string prefix = "budget_alert/" + month_ + "/";
  for (auto it = meta.lower_bound(prefix); it != meta.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    budget_alerts_[it->first.substr(prefix.size())] = std::atoi(it->second.c_str());
  }
}

void Accounting::AddToMonth(const Allocation& a, const Accrual& in_month) {
  for (const std::string& scope : {a.team, ProjectScope(a.team, a.project)}) {
    month_closed_[scope].gpu_ms += in_month.gpu_ms;
    month_closed_[scope].cost += in_month.cost;
  }
}

void Accounting::Open(const JobRecord& job, const Placement& placement, const std::vector<Node>& nodes,
                      const GpuCatalog& catalog, const std::string& pool_label, StoreBatch& batch) {
  std::vector<Entry>& entries = open_[job.spec->id];
  entries.clear();
  int slot = 0;
  for (const NodeShare& ns : placement.nodes) {
    const Node& node = nodes[ns.node];
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
      batch.allocations.push_back(a);
      by_gpu_[{a.node, a.gpu_index}].insert(a.job_id);
      entries.push_back({std::move(a), -1, -1});
    }
  }
}

double Accounting::Close(JobRecord& job, TimeMs end_ms, StoreBatch& batch) {
  auto it = open_.find(job.spec->id);
  if (it == open_.end()) return -1;
  double gpu_ms = 0;
  for (Entry& e : it->second) {
    Allocation& a = e.row;
    a.end_ms = std::max(end_ms, a.start_ms);
    a.idle = a.idle || job.idle_flagged;
    Accrual all = Accrue(a, kBeginningOfTime, kNever, a.end_ms, prices_);
    job.closed_cost += all.cost;
    gpu_ms += all.gpu_ms;
    AddToMonth(a, Accrue(a, month_from_, month_to_, a.end_ms, prices_));
    batch.allocations.push_back(a);
    auto on_gpu = by_gpu_.find({a.node, a.gpu_index});
    if (on_gpu != by_gpu_.end()) {
      on_gpu->second.erase(a.job_id);
      if (on_gpu->second.empty()) by_gpu_.erase(on_gpu);
    }
  }
  open_.erase(it);
  dirty_.erase(job.spec->id);
  return gpu_ms;
}

void Accounting::Reading(const std::string& node_id, int gpu, const GpuSample& sample, double idle_threshold_pct,
                         TimeMs now) {
  auto jobs = by_gpu_.find({node_id, gpu});
  if (jobs == by_gpu_.end()) return;
  for (const std::string& job_id : jobs->second) {
    auto it = open_.find(job_id);
    if (it == open_.end()) continue;
    for (Entry& e : it->second) {
      if (e.row.node != node_id || e.row.gpu_index != gpu) continue;
      double util = -1, mem = 0;
      bool own = false;
      for (const GpuProcess& p : sample.processes) {
        if (p.job_id != job_id) continue;
        own = true;
        mem += static_cast<double>(std::max<int64_t>(0, p.used_memory_mib));
        if (p.sm_util >= 0) util = std::max(0.0, util) + p.sm_util;
      }
      // No per-process figure: the GPU's, all of it for a whole GPU and at most that much for a
      // share (so a share is idle only when the whole GPU is).
      const bool own_reading = util >= 0;
      if (util < 0) util = sample.util_pct;
      if (!own && e.row.share >= 1 && sample.mem_used_mib >= 0) mem = static_cast<double>(sample.mem_used_mib);
      if (util < 0) continue;
      util = std::min(util, 100.0);
      // A time-slice or MPS share counts against its part of the GPU (a MIG instance's
      // readings are its own already).
      bool fraction = e.row.share < 1 && e.row.mig_profile.empty() && e.row.share > 0;
      double of_share = fraction ? std::min(100.0, util / e.row.share) : util;
      e.row.util_sum += of_share;
      e.row.mem_sum_mib += mem;
      e.row.samples++;
      e.last_util = of_share;
      e.last_gpu_util = util;
      e.last_mem_mib = mem;
      e.own_reading = own_reading;
      if (e.last_util >= idle_threshold_pct) {
        e.below_since = -1;
      } else if (e.below_since < 0) {
        e.below_since = now;
      }
      dirty_.insert(job_id);
    }
  }
}

void Accounting::Flush(TimeMs now, DurationMs every, StoreBatch& batch) {
  if (now - flushed_ms_ < every) return;
  for (const std::string& id : dirty_) {
    for (const Entry& e : open_[id]) batch.allocations.push_back(e.row);
  }
  dirty_.clear();
  flushed_ms_ = now;
}

double Accounting::JobCost(const JobRecord& job, TimeMs now) const {
  double cost = job.closed_cost;
  auto it = open_.find(job.spec->id);
  if (it != open_.end()) {
    for (const Entry& e : it->second) cost += Accrue(e.row, kBeginningOfTime, kNever, now, prices_).cost;
  }
  return cost;
}

std::vector<std::string> Accounting::OpenJobs() const {
  std::vector<std::string> ids;
  for (const auto& [id, entries] : open_) ids.push_back(id);
  return ids;
}

std::vector<std::string> Accounting::JobsOn(const std::string& node_id, int gpu) const {
  auto it = by_gpu_.find({node_id, gpu});
  return it == by_gpu_.end() ? std::vector<std::string>{}
                             : std::vector<std::string>(it->second.begin(), it->second.end());
}

std::vector<Allocation> Accounting::OpenRows() const {
  std::vector<Allocation> rows;
  for (const auto& [id, entries] : open_) {
    for (const Entry& e : entries) rows.push_back(e.row);
  }
  return rows;
}

Accounting::IdleState Accounting::Idle(const std::string& job_id) const {
  IdleState state;
  auto it = open_.find(job_id);
  if (it == open_.end()) return state;
  for (const Entry& e : it->second) {
    state.util = std::max(state.util, e.last_util);
    state.busy = state.busy || e.below_since < 0;
    state.since = std::max(state.since, e.below_since);
  }
  return state;
}

nlohmann::json Accounting::JobUse(const std::string& job_id) const {
  nlohmann::json out = nlohmann::json::array();
  auto it = open_.find(job_id);
  if (it == open_.end()) return out;
  for (const Entry& e : it->second) {
    if (e.last_util < 0) continue;
    out.push_back({{"node", e.row.node},
                   {"gpu", e.row.gpu_index},
                   {"share", e.row.share},
                   {"sm_util_pct", std::round(e.last_gpu_util * 10) / 10},
                   {"share_used_pct", std::round(e.last_util * 10) / 10},
                   {"avg_share_used_pct", std::round(e.row.avg_util() * 10) / 10},
                   {"memory_used_mib", std::llround(e.last_mem_mib)},
                   {"source", e.own_reading ? "process" : "gpu"}});
  }
  return out;
}

void Accounting::MarkIdle(const std::string& job_id) {
  auto it = open_.find(job_id);
  if (it == open_.end()) return;
  for (Entry& e : it->second) e.row.idle = true;
  dirty_.insert(job_id);
}

std::map<std::string, Accrual> Accounting::TeamMonth(TimeMs now) const {
  std::map<std::string, Accrual> used = month_closed_;
  for (const auto& [id, entries] : open_) {
    for (const Entry& e : entries) {
      Accrual acc = Accrue(e.row, month_from_, month_to_, now, prices_);
      for (const std::string& scope : {e.row.team, ProjectScope(e.row.team, e.row.project)}) {
        used[scope].gpu_ms += acc.gpu_ms;
        used[scope].cost += acc.cost;
      }
    }
  }
  return used;
}

nlohmann::json Accounting::BudgetStatus(const QuotaConfig& quotas, TimeMs now) const {
  std::map<std::string, Accrual> used = TeamMonth(now);
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
  for (const auto& [team, q] : quotas.teams) {
    if (q.budget.set()) add(team, team, "", q.budget);
    for (const auto& [project, b] : q.project_budgets) add(ProjectScope(team, project), team, project, b);
  }
  return out;
}

int Accounting::BudgetAlertSent(const std::string& scope) const {
  auto it = budget_alerts_.find(scope);
  return it == budget_alerts_.end() ? 0 : it->second;
}

void Accounting::SetBudgetAlertSent(const std::string& scope, int level, std::map<std::string, std::string>& meta,
                                    StoreBatch& batch) {
  budget_alerts_[scope] = level;
  std::string key = "budget_alert/" + month_ + "/" + scope;
  batch.meta[key] = meta[key] = std::to_string(level);
}

void Accounting::LoadAlerts(const std::map<std::string, std::string>& meta) {
  auto it = meta.find("alerts");
  if (it == meta.end()) return;
  nlohmann::json list = nlohmann::json::parse(it->second, nullptr, false);
  if (list.is_array()) alerts_ = std::move(list);
}

void Accounting::AddAlert(nlohmann::json alert, std::map<std::string, std::string>& meta, StoreBatch& batch) {
  alerts_.push_back(std::move(alert));
  if (alerts_.size() > kAlertsKept) alerts_.erase(alerts_.begin());
  batch.meta["alerts"] = meta["alerts"] = alerts_.dump(-1, ' ', false, kReplaceBadUtf8);
}

}  // namespace gantry
