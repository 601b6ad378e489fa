// The trace-driven simulator: replays a trace on simulated nodes with a simulated clock,
// calling the same Engine::Schedule() as the server after every batch of events, and
// measures what users care about (JCT, queueing delay, utilization, per-team service).
// Deterministic: the same cluster, trace, config, policy and seed give the same result.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/config_dir.h"
#include "core/node.h"
#include "core/node_pools.h"
#include "core/quota_config.h"
#include "sim/trace.h"

namespace gantry {

// A decision the simulation carried out, in order: a job's start (with each GPU it got, as
// node id and GPU index) or a running job's eviction (for `for_job`).
struct SimDecision {
  TimeMs t_ms = 0;
  bool start = true;
  std::string job_id;
  std::vector<std::pair<std::string, int>> gpus;  // starts
  std::string for_job;                            // evictions
};

struct SimOptions {
  std::string policy = "gantry";
  QuotaConfig quotas;                               // team guarantees, limits and fair-share weights
  bool scale_by_gpu_speed = false;                  // run time x (1.0 / relative_speed of the GPU type)
  DurationMs restart_overhead_ms = 60 * kSecondMs;  // paid by a preempted job on restart
  // Periodic checkpoints for jobs whose trace row gives none (0: such jobs lose all their
  // work when evicted). An evicted job resumes from its last checkpoint.
  DurationMs default_checkpoint_interval_ms = 30 * kMinuteMs;
  double estimate_error = 0;  // estimates = duration x U(1-e, 1+e) when the trace has none
  // Jobs carry no estimate, as most live jobs do: the engine plans with run times predicted
  // from finished jobs alike (RuntimePredictor), else with the time limit.
  bool no_estimates = false;
  // Node pools that grow and shrink with the queue (the controller's autoscaler decision):
  // nodes come up `startup` after they are asked for, spot nodes are reclaimed at their
  // pool's rate (their jobs evicted to their last checkpoint), idle ones go back after
  // scale_down_after. None: the cluster is the nodes given.
  AutoscalerConfig autoscaler;
  uint64_t seed = 1;        // seeds the estimate noise and the spot reclaims
  int series_points = 400;  // samples kept for the charts
  // Sees every start and eviction as it is made (a test compares them with the live
  // server's decisions on the same trace); none: not kept.
  std::function<void(const SimDecision&)> on_decision;
  bool keep_jobs = false;  // SimResult::jobs: one row per trace job (gantry sim --jobs-csv)
};

// One trace job as it went (SimOptions::keep_jobs): times in seconds since the trace's first
// submission; -1 for a start or end that never came.
struct SimJob {
  std::string id, team, user, gpu_types;  // gpu_types: the allowed types joined by '|', "" for any
  double gpus = 0;                        // GPUs asked (a fraction as its share)
  double submit_s = 0, first_start_s = -1, end_s = -1;
  double run_s = 0;  // its run time in the trace
  int evictions = 0;
  bool rejected = false;
};

struct TeamMetrics {
  int jobs = 0;
  double gpu_hours = 0;
  double share_of_gpu_hours = 0;
  double queue_delay_mean_s = 0;
  double queue_delay_max_s = 0;
  double max_starvation_s = 0;
  // The same, counted only while the team had a waiting job that fits its guarantee.
  double max_starvation_fitting_guarantee_s = 0;
  // The same, counted only while the starvation guard could have started one of its
  // waiting jobs: on GPUs idle or held by work a rescue may evict (preemptible, of a
  // preemptible class, evicted fewer than max_evictions times, of a team that guarantees
  // nothing or keeps GPUs after), of a type and layout the job allows.
  // Time a team waits for a GPU type held only by work nothing may evict is left out.
  double max_starvation_rescuable_s = 0;
};

// One node pool of an elastic simulation: what it ran and what it cost.
struct PoolMetrics {
  std::string name;
  std::string capacity;   // on_demand or spot
  double node_hours = 0;  // from each request (the cloud bills the start-up) to the node's return
  double gpu_hours = 0;
  double cost = 0;  // at the pool's price
  int peak_nodes = 0;
  int nodes_requested = 0;
  int nodes_returned = 0;
  int reclaims = 0;  // spot nodes taken back, with their jobs evicted
};

// Time series for charts, averaged over equal buckets of the makespan.
struct SimSeries {
  std::vector<double> t_s;                               // bucket start, seconds since the first submit
  std::vector<double> utilization;                       // allocated GPUs / cluster GPUs
  std::vector<double> queued;                            // waiting jobs
  std::map<std::string, std::vector<double>> team_gpus;  // allocated GPUs per team
};

struct SimResult {
  std::string policy;
  int cluster_gpus = 0;
  int jobs_total = 0;
  int jobs_completed = 0;
  int jobs_rejected = 0;
  int rows_skipped = 0;
  double makespan_s = 0;
  double gpu_utilization = 0;  // allocated GPU-time / cluster GPU-time
  // Work done, in the GPU-time jobs asked for: each running job's request (gpus, fraction,
  // MIG slices) x the speed its GPU's sharing leaves it, over cluster GPU-time.
  double useful_gpu_utilization = 0;
  double gpu_utilization_when_queued = -1;  // -1: no job ever waited (null in JSON)
  // Allocated GPU-time over itself plus the idle GPU-time a waiting job could have used
  // (sim/usable_idle.h), while jobs waited; -1: no job ever waited.
  double gpu_utilization_when_queued_usable = -1;
  double jct_mean_s = 0, jct_p50_s = 0, jct_p95_s = 0, jct_p99_s = 0;
  double queue_delay_mean_s = 0, queue_delay_p50_s = 0, queue_delay_p95_s = 0, queue_delay_p99_s = 0;
  double queue_delay_max_s = 0;
  int preemptions = 0;     // evictions, counting a job evicted twice twice
  int jobs_preempted = 0;  // jobs evicted at least once
  double max_team_starvation_s = 0;
  double max_team_starvation_fitting_guarantee_s = 0;
  double max_team_starvation_rescuable_s = 0;
  double jain_fairness = 0;
  // Run-time predictions (jobs planned with a prediction from finished jobs alike):
  // how many, and their error |predicted - actual| / actual.
  int predicted_jobs = 0;
  double prediction_error_mean = 0, prediction_error_p50 = 0;
  std::map<std::string, TeamMetrics> per_team;
  std::vector<std::string> rejected_samples;  // "t12: gpus: ..." (first few)
  std::vector<SimJob> jobs;                   // SimOptions::keep_jobs only, in trace order
  int64_t events = 0;                         // arrivals + completions + preemptions
  int64_t cycles = 0;                         // engine calls
  std::vector<double> jct_sorted_s;           // for CDFs
  std::vector<double> queue_delay_sorted_s;
  SimSeries series;
  // Elastic simulations only (SimOptions::autoscaler has pools): per pool, the cost of the
  // whole cluster (fixed nodes at on-demand prices, pools at theirs), of an always-on
  // cluster of the same peak size at on-demand prices, and what spot saved against
  // on-demand prices for the same hours. cluster_gpus is then the peak.
  std::vector<PoolMetrics> pools;
  double cost = 0;
  double always_on_cost = 0;
  double spot_saving = 0;
};

// Runs one policy over `trace` on `nodes`.
Expected<SimResult> Simulate(const std::vector<Node>& nodes, const Trace& trace, const ConfigSet& config,
                             const SimOptions& options);

}  // namespace gantry
