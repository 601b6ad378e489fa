// Placer: finds the best place for one demand in the current ClusterState, honouring
// reservations (a job that would still run at a reservation's start may not use its GPUs).
// Whole GPUs and gangs come from the idle-GPU index; shares from GPUs already shared or
// idle; MIG from a free instance, a new instance in free slots, or a re-partition of an
// idle MIG GPU, in that order of preference. A plain fraction takes the mode the site
// gives the node it lands on (SharingConfig): MPS threads, or a time-slice share (the
// whole GPU when time-sliced jobs may not share one).
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
  // What a share takes of one GPU of `type` on node n, in the mode it gets there.
  struct ShareNeed {
    SharingMode mode = SharingMode::kTimeSlice;
    GpuMode gpu_mode = GpuMode::kTimeSlice;
    int32_t milli = 0;   // of the GPU's compute: MPS threads x 10, or the time-slice share
    int64_t memory = 0;  // MiB
    bool alone = false;  // time-slice without packing: an idle GPU, held whole
    bool usable = true;  // false: MPS on a node that cannot run it
  };
  ShareNeed NeedOn(const Demand& d, int n, const GpuType& type) const;
  bool HostFits(int n, const Demand& d, TimeMs end_ms) const;
  NodeShare HostShare(int n, const Demand& d) const;

  const ClusterState& state_;
  const SchedulerConfig& config_;
};

}  // namespace gantry
