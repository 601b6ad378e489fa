// Carrying out a plan on a snapshot, as the simulator and the demo do (the server does the
// same through its state machine): started jobs move from pending to running, planned MIG
// changes rewrite the GPUs' layouts. Also the cluster summary shown by `gantry status`.
#pragma once

#include <map>
#include <string>

#include "core/gpu_catalog.h"
#include "sched/ordered_queue.h"
#include "sched/plan.h"

namespace gantry {

// Applies `plan` (made from `snap`) to `snap` at snap.now_ms: starts move to running,
// MIG layouts change, victims of preemption get their stop time. With `queue` (the one
// that ordered snap.pending), the started jobs leave through it, so its keys follow.
void ApplyPlan(const Plan& plan, Snapshot& snap, OrderedQueue* queue = nullptr);

// Moves running jobs whose stop time has come back to the queue, keeping their submit
// time and counting the eviction; returns their ids.
std::vector<std::string> RequeueStopped(Snapshot& snap);

struct TypeCapacity {
  int total = 0;         // GPUs on nodes that are up or draining
  int available = 0;     // idle, healthy GPUs on schedulable nodes
  double allocated = 0;  // GPU shares held by running jobs
  int unavailable = 0;   // out of service: on drained or down nodes, unhealthy or fenced
};

struct ClusterStatus {
  std::map<std::string, TypeCapacity> by_type;
  int total_gpus = 0;
  int available_gpus = 0;
  double allocated_gpus = 0;
  int unavailable_gpus = 0;
  double utilization = 0;  // allocated / total
  int queued = 0;
  int running = 0;
  int nodes = 0;
  int nodes_schedulable = 0;
};

ClusterStatus ComputeStatus(const Snapshot& snap, const GpuCatalog& catalog);

}  // namespace gantry
