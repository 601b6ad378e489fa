// The autoscaler's decision, shared by the controller and the simulator: given the pools,
// what each has (nodes up, requested, idle) and the jobs the engine could not start for
// lack of room, which pools get how many more nodes and which idle nodes go back.
// Deterministic and free of I/O: the caller runs the hooks and keeps the state.
//
// - Demand: waiting jobs that more nodes would start: not held by quota, budget or hold
//   (those never ask), waiting at least scale_up_after, and not due to start from a
//   reservation before a new node could be up.
// - Each such job goes to the cheapest pool that fits it (type, size, labels, taints):
//   spot pools only for preemptible jobs; a spot pool that answered "no capacity" keeps
//   its jobs waiting for spot_fallback_after, then they go to on-demand.
// - The fewest nodes: jobs are packed first into the room of nodes already requested, then
//   onto new ones, in queue order, within each pool's maximum.
// - Scale-down: a node idle for scale_down_after above the pool's minimum goes back,
//   unless the pool was asked for more this round (no flapping).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/node_pools.h"

namespace gantry {

struct PoolStatus {
  int up = 0;         // registered nodes
  int requested = 0;  // asked for, not registered yet
  // Registered nodes with no job, and since when.
  std::vector<std::pair<std::string, TimeMs>> idle;
  TimeMs no_capacity_since = kNever;  // the pool's last scale-up said "no capacity"
};

struct ScalingDemand {
  const JobSpec* spec = nullptr;
  TimeMs waiting_since = 0;
  TimeMs reserved_start_ms = kNever;  // the engine's promise, when it holds a reservation
  bool on_demand_only = false;        // critical work (a job that is not preemptible never goes to spot anyway)
};

struct ScalingPlan {
  std::map<size_t, int> add;                       // pool index -> nodes to ask for
  std::vector<std::string> remove;                 // idle nodes to give back
  std::map<std::string, std::string> waiting_for;  // job id -> what it waits for, for the queue
};

ScalingPlan PlanScaling(const AutoscalerConfig& config, const GpuCatalog& catalog, const std::vector<PoolStatus>& pools,
                        const std::vector<ScalingDemand>& demand, TimeMs now);

// Whether a pool's node could ever hold the job (type, size, labels, taints, CPUs, memory).
bool PoolFits(const NodePool& pool, const GpuCatalog& catalog, const JobSpec& spec);

}  // namespace gantry
