// Placer: finds the best place for one demand in the current ClusterState, honouring
// reservations (a job that would still run at a reservation's start may not use its GPUs).
// Whole GPUs and gangs come from the idle-GPU index; shares from GPUs already shared or
// idle; MIG from a free instance, a new instance in free slots, or a re-partition of an
// idle MIG GPU, in that order of preference.
#pragma once

#include <optional>
#include <vector>

#include "core/scheduler_config.h"
#include "sched/cluster_state.h"
#include "sched/demand.h"

namespace gantry {

struct PlacementChoice {
  Placement placement;
  std::vector<MigChange> mig_changes;
};

class Placer {
 public:
  Placer(const ClusterState& state, const SchedulerConfig& config) : state_(state), config_(config) {}

  // Where `d` fits now for a job expected to end at end_ms, or nullopt.
  std::optional<PlacementChoice> Find(const Demand& d, TimeMs end_ms) const;

 private:
  std::optional<PlacementChoice> FindWhole(const Demand& d, TimeMs end_ms) const;
  std::optional<PlacementChoice> FindShared(const Demand& d, TimeMs end_ms) const;
  std::optional<PlacementChoice> FindMig(const Demand& d, TimeMs end_ms) const;
  bool HostFits(int n, const Demand& d, TimeMs end_ms) const;
  NodeShare HostShare(int n, const Demand& d) const;

  const ClusterState& state_;
  const SchedulerConfig& config_;
};

}  // namespace gantry
