// The simulator's internals, shared by its two source files: the per-job state, the event
// kinds and the Simulation class (simulator.cc: the event loop, jobs and metrics;
// elastic.cc: node pools that grow and shrink, spot reclaims and their costs).
#pragma once

#include <map>
#include <queue>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sched/autoscaler.h"
#include "sched/engine.h"
#include "sched/fair_share.h"
#include "sched/ordered_queue.h"
#include "sched/queue_order.h"
#include "sched/runtime_predictor.h"
#include "sched/team_clocks.h"
#include "sim/simulator.h"
#include "sim/usable_idle.h"

namespace gantry::sim_internal {

struct JobState {
  int team = 0;
  TimeMs first_start = -1;
  TimeMs end = -1;
  DurationMs remaining_ms = 0;   // work left at the run's start, on the original hardware alone
  DurationMs overhead_ms = 0;    // restart overhead owed by the next run
  DurationMs checkpoint_ms = 0;  // periodic checkpoint interval (work time); 0: none
  double share = 0;              // GPUs held while running
  double asked = 0;              // GPUs it asked for (a time-sliced quarter held whole asked 0.25)
  double rate = 0;               // fair-share usage per ms while running
  double gpu_speed = 1;          // of the GPU type of the current run (scale_by_gpu_speed)
  double shared_speed = 1;       // slow-down from jobs sharing its GPU (SharedSpeed)
  double work_done_ms = 0;       // work done in this run up to progress_t
  TimeMs progress_t = 0;
  DurationMs overhead_left_ms = 0;  // of this run's restart overhead, not yet paid
  TimeMs deadline = kNever;         // the run's time limit
  int shared_gpu = -1;              // flat index of the GPU it shares (time-slice, MPS); -1: none
  double attained_gpu_ms = 0;       // service in earlier runs
  int evictions = 0;
  int generation = 0;   // bumps at each start and stop: stale stop events are ignored
  int end_version = 0;  // bumps when the end is re-planned (its GPU's sharers changed)
  bool rejected = false;
  bool done = false;
  TimeMs queued_since = 0;      // when it last entered the queue (the autoscaler's wait)
  JobSpecPtr spec;              // as admitted
  DurationMs predicted_ms = 0;  // the run time predicted at admission (0: none)
};

// kWake: a team's clock reaches a threshold (the starvation bound, reclaim_after) with no
// other event due, as the live server's one-second tick would notice.
// Elastic pools: kNodeUp (a requested node registers), kReclaim (a spot node is taken
// back; `job` is the node, the number its incarnation), kScale (the autoscaler's tick) and
// kTraceReclaim (a recorded reclaim of a pool's longest-up node; `job` is the pool).
enum class EventKind { kEnd, kStop, kWake, kNodeUp, kReclaim, kScale, kTraceReclaim };
using Event = std::tuple<TimeMs, size_t, int, EventKind>;  // time, job, end_version or generation, kind

inline double Speed(const JobState& js) { return js.gpu_speed * js.shared_speed; }

// Advances a running job's work to t: the restart overhead first, then work at its speed.
inline void Progress(JobState& js, TimeMs t) {
  DurationMs dt = std::max<DurationMs>(0, t - js.progress_t);
  DurationMs overhead = std::min(dt, js.overhead_left_ms);
  js.overhead_left_ms -= overhead;
  js.work_done_ms += static_cast<double>(dt - overhead) * Speed(js);
  js.progress_t = t;
}

// One logged stretch [t, next t): allocated GPUs, waiting jobs, GPUs per team.
struct LogEntry {
  TimeMs t = 0;
  double allocated = 0;
  int queued = 0;
  size_t team_offset = 0;  // into team_log_
};

class Simulation {
 public:
  Simulation(const std::vector<Node>& nodes, const Trace& trace, const ConfigSet& config, const SchedulerConfig& policy,
             const SimOptions& options)
      : trace_(trace),
        config_(config),
        options_(options),
        policy_(policy),
        engine_(config.catalog, policy, &options.quotas),
        ledger_(policy.fairshare_half_life_ms),
        max_gpus_per_type_(MaxGpusPerType(nodes, options.autoscaler.pools, config.catalog)),
        usable_idle_(config.catalog, max_gpus_per_type_) {
    snap_.nodes = nodes;
    for (const Node& n : nodes) {
      largest_node_ = std::max(largest_node_, static_cast<int>(n.gpus.size()));
      node_gpu_offset_.push_back(static_cast<int>(gpu_jobs_.size()));
      for (const Gpu& g : n.gpus) {
        gpu_jobs_.push_back(0);
        cluster_gpus_++;
        if (g.mig_enabled) has_partial_ = true;
        if (!g.mig_enabled && g.health == GpuHealth::kHealthy && n.schedulable()) idle_gpus_++;
      }
    }
    slots_.resize(nodes.size());
    fixed_gpus_ = live_gpus_ = cluster_gpus_;
    admissible_nodes_ = nodes;
    reclaim_rng_.seed(options.seed * 7919 + 17);
    for (const NodePool& pool : options.autoscaler.pools) {
      largest_node_ = std::max(largest_node_, pool.gpus_per_node);
      Node shape;
      shape.id = pool.name;
      for (int g = 0; g < pool.gpus_per_node; ++g) {
        Gpu gpu;
        gpu.index = g;
        gpu.type = pool.type;
        shape.gpus.push_back(std::move(gpu));
      }
      shape.cpus = pool.cpus > 0 ? pool.cpus : 64;
      shape.memory_mib = pool.memory_mib > 0 ? pool.memory_mib : 512 * 1024;
      shape.labels = pool.labels;
      shape.taints = pool.taints;
      pool_shapes_.push_back(shape);
      // As many as the pool may have: a gang job may need several.
      for (int i = 0; i < std::min(pool.max_nodes, 1024); ++i) admissible_nodes_.push_back(shape);
      PoolMetrics metrics;
      metrics.name = pool.name;
      metrics.capacity = ToString(pool.capacity);
      pool_metrics_.push_back(std::move(metrics));
      pool_live_.push_back(0);
    }
  }

  SimResult Run();

 private:
  void Admit(size_t i);
  void Enqueue(PendingJob job, size_t trace_index);
  bool FitsGuarantee(const JobSpec& spec, int team) const;
  size_t Waiting() const { return snap_.pending.size(); }
  // The trace index of a queued job (its arrival number less one).
  static size_t TraceIndex(const PendingJob& job) { return job.arrival - 1; }
  // The teams' clocks as they stand after the instant's events, before its cycle, and
  // again after its starts (as the live server's cycle keeps them); a wake is due at the
  // next threshold they reach.
  void UpdateTeamClocks();
  void ScheduleWake(TimeMs now);
  // `for_autoscaler`: the engine explains every waiting job (the autoscaler's demand).
  void Cycle(bool for_autoscaler = false);
  void Start(const StartDecision& s);
  void Release(size_t job);  // frees a running job's GPUs and accounting
  void Finish(size_t job);
  void Stop(size_t job);  // a preempted job's grace period is over
  void PlanEnd(size_t job);
  void Reshare(int gpu);  // the jobs sharing a GPU changed: new speeds and ends
  void Account(TimeMs t);
  // Idle GPUs a waiting job could have started on now (sim/usable_idle.h).
  double UsableIdleGpus();
  // node_types_ and node_idle_: per node, its GPU type and the GPUs no job holds.
  void CountIdle();
  static std::vector<int> MaxGpusPerType(const std::vector<Node>& nodes, const std::vector<NodePool>& pools,
                                         const GpuCatalog& catalog);
  // The measured starvation (results): teams waiting with no GPU after the instant's starts
  // (starvation_measure.cc).
  void MeasureStarvation(TimeMs t);
  // node_idle_ += per node the GPUs a starvation rescue could take now.
  void CountRescuable();
  void Summarize(SimResult& r);
  void KeepJobs(SimResult& r) const;  // SimOptions::keep_jobs
  void SummarizePools(SimResult& r);
  int TeamIndex(const std::string& team);
  // Elastic pools.
  bool Elastic() const { return options_.autoscaler.enabled(); }
  void Autoscale();
  void RequestNode(size_t pool);
  void NodeUp(size_t n);
  void ReturnNode(size_t n);
  void Reclaim(size_t n);
  // A recorded reclaim (spot_reclaim_trace): the pool's node up the longest, if any.
  void ReclaimFromTrace(size_t pool);
  void TouchNode(size_t n);  // a job started or ended on it: is it idle now?
  void ScheduleScaleTick(bool more_to_come);

  const Trace& trace_;
  const ConfigSet& config_;
  const SimOptions& options_;
  const SchedulerConfig& policy_;
  Engine engine_;
  FairShareLedger ledger_;
  RuntimePredictor predictor_;
  Snapshot snap_;
  OrderedQueue queue_;  // keeps snap_.pending in queue order, as the live server's
  TeamClocks clocks_;   // the engine's starving and below-guarantee clocks, as the live server's
  TimeMs wake_at_ = kNever;
  std::vector<size_t> running_job_;  // trace index of snap_.running[i]
  std::vector<size_t> running_pos_;  // trace index -> position in snap_.running
  std::vector<JobState> jobs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_queue_;
  std::vector<int> node_gpu_offset_;
  std::vector<int> gpu_jobs_;
  std::map<int, std::vector<size_t>> gpu_sharers_;  // flat GPU index -> jobs sharing it
  int cluster_gpus_ = 0;
  int idle_gpus_ = 0;
  int largest_node_ = 0;
  bool has_partial_ = false;  // MIG GPUs or shared jobs: "no idle GPU" does not mean full

  std::vector<std::string> teams_;
  std::map<std::string, int> team_index_;
  std::vector<double> team_alloc_;
  std::vector<double> team_rate_;
  std::vector<int> team_waiting_;
  std::vector<TimeMs> starve_since_;
  std::vector<double> team_guarantee_;
  std::vector<int> team_waiting_fit_;  // waiting jobs no larger than the team's guarantee
  std::vector<TimeMs> starve_fit_since_;
  std::vector<double> team_max_starve_fit_ms_;
  std::vector<double> team_max_starve_ms_;
  std::vector<UsableIdle> team_shapes_;  // each team's waiting jobs' shapes
  std::vector<TimeMs> starve_allowed_since_;
  std::vector<double> team_max_starve_allowed_ms_;
  std::vector<double> team_gpu_ms_;

  TimeMs t0_ = 0;
  TimeMs last_t_ = 0;
  double allocated_ = 0;
  double useful_ = 0;  // GPUs asked for by running jobs x the speed sharing leaves them
  double alloc_gpu_ms_ = 0;
  double useful_gpu_ms_ = 0;
  double queued_ms_ = 0;
  double alloc_when_queued_gpu_ms_ = 0;
  std::vector<int> max_gpus_per_type_;
  UsableIdle usable_idle_;  // the waiting jobs' shapes
  double usable_idle_when_queued_gpu_ms_ = 0;
  std::vector<GpuTypeId> node_types_;  // UsableIdleGpus' buffers, per node
  std::vector<int> node_idle_;
  std::vector<LogEntry> log_;
  std::vector<double> team_log_;
  int64_t events_ = 0;
  int64_t cycles_ = 0;
  int preemptions_ = 0;
  int jobs_preempted_ = 0;
  std::vector<std::string> rejected_samples_;
  int rejected_ = 0;

  // Elastic pools: per node index, its pool (-1: a fixed node) and state.
  enum class Slot : uint8_t { kFixed, kRequested, kUp, kGone };
  struct NodeSlot {
    int pool = -1;
    Slot state = Slot::kFixed;
    TimeMs requested_at = 0;
    TimeMs idle_since = kNever;  // up with no job since
    int incarnation = 0;
  };
  std::vector<NodeSlot> slots_;
  std::vector<Node> admissible_nodes_;  // the fixed nodes and each pool's most: what a job may ever get
  std::vector<Node> pool_shapes_;       // a node of each pool
  std::vector<PoolMetrics> pool_metrics_;
  std::vector<int> pool_live_;  // nodes requested or up
  std::vector<ScalingDemand> demand_;
  std::map<std::string, TimeMs> reserved_at_;
  TimeMs scale_tick_at_ = kNever;
  int quiet_ticks_ = 0;  // ticks in a row that changed nothing, with nothing else due
  double live_gpus_ = 0, live_gpu_ms_ = 0, live_when_queued_gpu_ms_ = 0, fixed_gpus_ = 0;
  int peak_gpus_ = 0;
  std::mt19937_64 reclaim_rng_;
};

}  // namespace gantry::sim_internal
