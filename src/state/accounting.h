// The controller's accounting, a class beside its state machine: a ledger interval per GPU
// share of every run (opened at the start, closed at the run's real end), telemetry
// averaged into the open intervals, this month's spend by team and project, the budget
// alerts sent and the latest alerts. It does no I/O and reads no clock: it is given the
// time, the store's rows, and the batch and meta map of the controller's next commit. What
// follows from a figure (stopping a job, holding a team, sending a webhook) is the
// controller's.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "billing/calendar.h"
#include "billing/pricing.h"
#include "core/quota_config.h"
#include "protocol/gpu_readings.h"
#include "state/job_record.h"
#include "state/store_records.h"

namespace gantry {

class Accounting {
 public:
  // The calendar (pricing.timezone) and the price book: the configured one merged with the
  // prices already billed (kept in `meta`). `warnings` gets each configured past price that
  // differs from what was billed (it applies from now, not retroactively).
  Status Configure(const GpuCatalog& catalog, const PricingConfig& pricing, std::map<std::string, std::string>& meta,
                   StoreBatch& batch, TimeMs now, std::vector<std::string>* warnings);
  const Calendar& calendar() const { return calendar_; }
  const PriceBook& prices() const { return prices_; }
  // The on-demand list prices (no pool overrides): what spot hours are compared with.
  const PriceBook& on_demand_prices() const { return on_demand_prices_; }

  // An interval left open by an earlier controller whose run goes on.
  void Adopt(Allocation open);
  // Starts the budget month of `now`: its closed intervals (`month_rows`, from the store) and
  // the budget alerts already sent (from `meta`).
  void StartMonth(TimeMs now, const std::vector<Allocation>& month_rows,
                  const std::map<std::string, std::string>& meta);
  bool MonthOver(TimeMs now) const { return now >= month_to_; }
  const std::string& month() const { return month_; }
  TimeMs month_from() const { return month_from_; }
  TimeMs month_to() const { return month_to_; }

  // A run started on `placement`: one interval per GPU share, written to `batch`.
  void Open(const JobRecord& job, const Placement& placement, const std::vector<Node>& nodes, const GpuCatalog& catalog,
            const std::string& pool_label, StoreBatch& batch);
  // The run's intervals end at `end_ms`; the job's closed cost grows by their cost. Returns
  // the GPU-ms they held, or -1 when the job had none open.
  double Close(JobRecord& job, TimeMs end_ms, StoreBatch& batch);
  // One reading of one GPU, added to the intervals open on it: each job gets what its own
  // processes used where the reading has per-process figures, else the GPU's.
  void Reading(const std::string& node_id, int gpu, const GpuSample& sample, double idle_threshold_pct, TimeMs now);
  // Writes the open intervals' telemetry sums every `every` ms.
  void Flush(TimeMs now, DurationMs every, StoreBatch& batch);

  // The cost of a job so far: its closed runs and its open intervals up to `now`.
  double JobCost(const JobRecord& job, TimeMs now) const;
  // The jobs with open intervals; the jobs open on a GPU.
  std::vector<std::string> OpenJobs() const;
  std::vector<std::string> JobsOn(const std::string& node_id, int gpu) const;
  // The open intervals with their newest telemetry.
  std::vector<Allocation> OpenRows() const;
  // A job's readings against the idle threshold: the highest latest utilization of its
  // shares (-1: no reading yet), whether any share is busy, and since when all are under.
  struct IdleState {
    double util = -1;
    TimeMs since = -1;
    bool busy = false;
  };
  IdleState Idle(const std::string& job_id) const;
  // What each share of a job's current run uses (latest and average readings), for the
  // job's view: an array of {node, gpu, share, sm_util_pct (of the GPU), share_used_pct,
  // avg_share_used_pct, memory_used_mib, source: "process" (its own processes' figure) or
  // "gpu" (the GPU's, an upper bound: NVML gives no per-client SM figure under MPS)};
  // empty before the first reading.
  nlohmann::json JobUse(const std::string& job_id) const;
  // Marks the job's open intervals idle (billed as idle time).
  void MarkIdle(const std::string& job_id);

  // This month's use of every budget: closed intervals plus the open ones up to `now`.
  nlohmann::json BudgetStatus(const QuotaConfig& quotas, TimeMs now) const;
  // This month's GPU-ms and cost by team (closed and open up to `now`).
  std::map<std::string, Accrual> TeamMonth(TimeMs now) const;
  // The highest alert level (80, 100) sent this month for a budget scope; raising it is
  // written to `meta` and `batch`.
  int BudgetAlertSent(const std::string& scope) const;
  void SetBudgetAlertSent(const std::string& scope, int level, std::map<std::string, std::string>& meta,
                          StoreBatch& batch);

  // The latest alerts, newest last (kept in `meta`, so they survive a restart).
  void LoadAlerts(const std::map<std::string, std::string>& meta);
  void AddAlert(nlohmann::json alert, std::map<std::string, std::string>& meta, StoreBatch& batch);
  const nlohmann::json& alerts() const { return alerts_; }

 private:
  struct Entry {
    Allocation row;
    double last_util = -1;      // the latest reading, as % of this share (a quarter GPU at 20% SM: 80)
    double last_gpu_util = -1;  // the same reading as % of the whole GPU
    double last_mem_mib = -1;
    bool own_reading = false;  // the job's own processes' SM figure, not the GPU's
    TimeMs below_since = -1;   // readings under the idle threshold since then (-1: busy)
  };
  void AddToMonth(const Allocation& a, const Accrual& in_month);

  Calendar calendar_;
  PriceBook prices_;
  PriceBook on_demand_prices_;
  std::unordered_map<std::string, std::vector<Entry>> open_;             // job id -> its current run's shares
  std::set<std::string> dirty_;                                          // open entries with unsaved telemetry
  std::map<std::pair<std::string, int>, std::set<std::string>> by_gpu_;  // (node, GPU) -> jobs on it
  TimeMs flushed_ms_ = 0;
  std::string month_;  // the budget month (YYYY-MM) and its bounds
  TimeMs month_from_ = 0, month_to_ = 0;
  std::map<std::string, Accrual> month_closed_;  // "team" / "team/project" -> closed intervals' part this month
  std::map<std::string, int> budget_alerts_;     // scope -> highest alert sent this month (80, 100)
  nlohmann::json alerts_ = nlohmann::json::array();
};

}  // namespace gantry
