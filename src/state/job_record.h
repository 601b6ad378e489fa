// A job as the controller keeps it: the accepted spec plus its life so far (state, runs,
// exits, cost). What the scheduler reads (placement, kill time, nomination) is not here: the
// job's entry in the scheduler's snapshot owns it, and the JSON forms are given it as a
// JobSchedule. Also the JSON forms: the spec as users write it (round-trips through
// ParseJobSpec), the stored document, and the API view.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job_arrays.h"
#include "core/node.h"
#include "protocol/spec_json.h"
#include "sched/plan.h"

namespace gantry {

enum class JobState : uint8_t { kPending, kRunning, kStopping, kSucceeded, kFailed, kCancelled };

const char* ToString(JobState s);
bool ParseJobState(const std::string& text, JobState* out);
inline bool IsTerminal(JobState s) { return s >= JobState::kSucceeded; }

// Why a running job is being stopped; decides what happens when it has exited.
enum class StopCause : uint8_t {
  kNone,
  kCancel,
  kPreempt,
  kTimeLimit,
  kNodeFault,
  kCostLimit,
  kIdle,
  kGpuMemory,
  kReclaim
};
const char* ToString(StopCause c);

// A port a node lends to a running job: "master" (MASTER_PORT, on rank 0's node) or one
// of the spec's named ports (on each node of the job).
struct JobPort {
  std::string name;
  int node = 0;  // index into the controller's nodes
  int port = 0;
};

struct JobRecord {
  uint64_t seq = 0;  // the id as a number: ids are "1", "2", ... in submit order
  JobSpecPtr spec;
  JobState state = JobState::kPending;
  TimeMs submit_ms = 0;
  TimeMs start_ms = -1;        // of the current or last run
  TimeMs first_start_ms = -1;  // of the first run (queueing delay)
  TimeMs end_ms = -1;          // when it reached a final state
  int runs = 0;                // starts so far; the agent's GANTRY_RESTART_COUNT is runs - 1
  int evictions = 0;           // preempted and requeued
  int fault_retries = 0;       // requeued after a node or GPU fault
  int failure_retries = 0;     // restarted after a non-zero exit
  double attained_gpu_ms = 0;  // GPU-ms of service in finished runs
  int exit_code = -1;          // of the last run; -1: none
  std::string reason;          // why it ended, or why it is stopping
  StopCause stop_cause = StopCause::kNone;
  std::string hold;                   // pending and held out of the queue: "user" or "admin" (who may release)
  uint64_t array_id = 0;              // a task of array `array_id` (its first task's seq); 0: not in an array
  int array_task = -1;                // the task index (SLURM_ARRAY_TASK_ID)
  int array_limit = 0;                // at most this many of the array's tasks queued or running; 0: any
  std::vector<DependencyTerm> after;  // spec->dependency, parsed
  int64_t submit_steady_us = -1;      // monotonic submit time in this process (latency metric; not stored)
  double closed_cost = 0;             // cost of the runs that ended (the ledger's closed intervals)
  int cost_alert = 0;                 // cost-limit alerts sent: 0, 80 or 100 (%)
  bool idle_flagged = false;          // the current run holds GPUs it does not use
  TimeMs last_exit_ms = -1;           // the latest exit reported for the current run (not stored)
  std::vector<JobPort> ports;         // lent to the current run; given back when it ends
};

// What the job's scheduler entry holds, as the JSON forms need it: the placement (node
// indices into the controller's nodes) and kill time of a running or stopping job, the
// nomination of a pending one (jobs are being evicted for it).
struct JobSchedule {
  const Placement* placement = nullptr;
  TimeMs stop_at_ms = kNever;
  bool nominated = false;
};

// A stored job read back: its record and what goes back into its scheduler entry.
struct LoadedJob {
  JobRecord record;
  Placement placement;
  TimeMs stop_at_ms = kNever;
  bool nominated = false;
};

// The stored document of a job (node indices written as node ids).
nlohmann::json JobToDoc(const JobRecord& job, const JobSchedule& schedule, const std::vector<Node>& nodes);
// Reads a stored document back; node ids become indices through `node_index`.
Expected<LoadedJob> JobFromDoc(const nlohmann::json& doc, const std::function<int(const std::string&)>& node_index);

// The API view: state, times as UTC text, request, placement with GPU UUIDs. Without
// `full`, the command, environment and working directory are left out.
nlohmann::json JobToApi(const JobRecord& job, const JobSchedule& schedule, const std::vector<Node>& nodes,
                        const GpuCatalog& catalog, bool full);

// The part of one GPU a share holds: 1, the fraction, or a MIG profile's compute slices
// over the GPU's (3g.40gb on an H100: 3/7). What the ledger bills.
double ShareOfGpu(const GpuShare& g, const GpuType& type);

nlohmann::json PlacementToJson(const Placement& p, const std::vector<Node>& nodes, const GpuCatalog& catalog);

}  // namespace gantry
