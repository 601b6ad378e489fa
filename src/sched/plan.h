// The engine's input (a snapshot of nodes, running jobs and the queue at one instant)
// and its output (a plan). Nodes are referred to by their index in Snapshot::nodes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/time.h"

namespace gantry {

// What a job holds on one GPU: all of it (exclusive), a share (time-slice, MPS) or a MIG
// instance.
struct GpuShare {
  int gpu = 0;                   // GPU index on the node
  int32_t milli = kMilliPerGpu;  // share of the GPU x 1000 (MIG: compute slices / total)
  int mps_thread_percent = 0;    // MPS only
  int64_t memory_mib = 0;        // memory reserved for the share (time-slice, MPS, MIG)
  int mig_profile = -1;          // MIG only: profile index of the node's GPU model
  int mig_start = -1;            // MIG only: memory slot where the instance starts
};

struct NodeShare {
  int node = 0;  // index into Snapshot::nodes
  std::vector<GpuShare> gpus;
  int cpus = 0;
  int64_t memory_mib = 0;
};

// Where a job runs: one NodeShare per node of its gang.
struct Placement {
  std::vector<NodeShare> nodes;
  // How its GPUs are held; a fraction's mode as chosen for its node (never kAuto).
  SharingMode sharing = SharingMode::kExclusive;
  int gpu_count() const;
};

// The mode a job's GPUs are held in: the job's own, or the one chosen for its plain fraction.
inline SharingMode HeldSharing(const JobSpec& spec, const Placement& p) {
  return spec.request.sharing == SharingMode::kAuto ? p.sharing : spec.request.sharing;
}

struct RunningJob {
  JobSpecPtr spec;
  TimeMs start_ms = 0;  // of this run
  Placement placement;
  TimeMs submit_ms = 0;            // when first submitted: an evicted job requeues with it
  TimeMs last_checkpoint_ms = -1;  // -1: none in this run (an eviction loses all of it)
  int evictions = 0;               // times evicted before
  double attained_gpu_ms = 0;      // GPU-milliseconds of service before this run
  TimeMs stop_at_ms = kNever;      // being preempted: stops at this time
};

struct PendingJob {
  JobSpecPtr spec;       // validated (ValidateJobSpec) before it enters the queue
  TimeMs submit_ms = 0;  // kept across evictions: a requeued job keeps its place
  double attained_gpu_ms = 0;
  int evictions = 0;
  // Jobs were evicted for it: it goes first in its class, so the GPUs freed for it are
  // not taken by others (like a Kubernetes pod's nominated node). The caller sets it
  // from Plan::preemptions and clears it when the job starts.
  bool nominated = false;
  // Arrival order among jobs submitted in the same millisecond (a trace has hundreds at
  // once), compared as a number before the ids; 0 everywhere: by id alone.
  uint64_t arrival = 0;
};

struct Snapshot {
  std::vector<Node> nodes;
  std::vector<RunningJob> running;
  std::vector<PendingJob> pending;
  TimeMs now_ms = 0;
  // Decayed fair-share usage per team (FairShareLedger); absent teams have none.
  std::map<std::string, double> team_usage;
  // Since when each team has held less than its guarantee while it had jobs waiting
  // (kept by the caller across cycles); reclaim waits for preemption.reclaim_after.
  std::map<std::string, TimeMs> below_guarantee_since;
  // Teams with jobs waiting and no GPU held, and since when (the starvation guard: past
  // SchedulerConfig::starvation_bound_ms, each one's smallest job goes first).
  std::map<std::string, TimeMs> starving_since;
  // The guarantee of each team the quotas do not list, this cycle (QuotaConfig::EqualShare,
  // worked out by the caller with the clocks: EqualShareNow in team_clocks.h); 0: none.
  double equal_share = 0;
  // Teams ("team") and projects ("team/project") whose new jobs are held (a budget spent),
  // with the reason shown in the queue.
  std::map<std::string, std::string> holds;
  // GPUs (node index, GPU index) that take no new job for now: an MPS GPU whose clients
  // are being stopped after a fault (its MPS server refuses new clients until they are gone).
  std::set<std::pair<int, int>> held_back_gpus;
};

struct StartDecision {
  size_t pending_index = 0;  // into Snapshot::pending
  std::string job_id;
  Placement placement;
  bool backfilled = false;  // started past a higher-ranked job that waits
};

// A MIG change the agent must make before a start: destroy unused instances, create new.
struct MigChange {
  int node = 0;
  int gpu = 0;
  std::vector<MigPlacement> destroy;
  std::vector<MigPlacement> create;
  std::string for_job;
};

struct Reservation {
  std::string job_id;
  TimeMs start_ms = 0;  // the latest time the job will start, if estimates hold
  Placement placement;  // the GPUs held for it
};

enum class WaitCode : uint8_t {
  kNoCapacity,         // fits the cluster, not its free GPUs now
  kBehindReservation,  // would delay a higher-ranked job's reservation
  kStrictOrder,        // backfill off: waits behind a blocked higher-ranked job
  kNeverFits,          // larger than any node, no node of its type, ...
  kNoSchedulableNode,  // only drained or down nodes could hold it
  kNotExamined,        // past the backfill depth this cycle
  kQuota,              // its team, project or user is at a limit
  kPreempting,         // jobs are being evicted to make room for it
  kHeld,               // its team's or project's budget is spent (Snapshot::holds)
};
const char* ToString(WaitCode c);

struct WaitingJob {
  size_t pending_index = 0;
  std::string job_id;
  int position = 0;  // 1 = next in line after this cycle
  WaitCode code = WaitCode::kNoCapacity;
  uint32_t reason_id = 0;              // into Plan::reasons (jobs of one shape share one)
  TimeMs estimated_start_ms = kNever;  // set when the job holds a reservation
};

// Evict a running job: it gets until stop_at_ms to checkpoint, then stops and requeues.
struct Preemption {
  size_t running_index = 0;  // into Snapshot::running
  std::string job_id;
  std::string for_job;
  TimeMs stop_at_ms = 0;
  std::string reason;  // "priority", "reclaim", "service" or "starvation"
};

struct Plan {
  std::vector<StartDecision> starts;
  std::vector<Preemption> preemptions;
  std::vector<MigChange> mig_changes;
  std::vector<Reservation> reservations;
  std::vector<WaitingJob> waiting;   // in queue order
  std::vector<std::string> reasons;  // for people: "needs 8 GPUs on one node; ..."

  const std::string& reason(const WaitingJob& w) const { return reasons[w.reason_id]; }
};

// When a job is expected to end: its predicted run time (from similar jobs) or else its
// estimate, if given and not yet passed; else its time limit; an overdue job is assumed to
// end within a minute.
TimeMs ExpectedEnd(const JobSpec& spec, TimeMs start_ms, TimeMs now_ms);
// The same for a running job, which ends at its stop time if it is being preempted.
TimeMs ExpectedEnd(const RunningJob& job, TimeMs now_ms);

}  // namespace gantry
