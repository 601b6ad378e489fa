// Earliest start of a blocked job: from each GPU's expected free time (the latest expected
// end of the jobs on it) find when enough GPUs on enough nodes of one type are free, and
// which ones to hold. Used for backfill reservations and estimated start times.
//
// Worked example: a job needs 8 GPUs on one node; node-3 has 2 idle GPUs and 6 busy until
// 10:00, 10:30 (x3), 11:00 (x2); node-5 has 8 busy until 12:00. node-3 is ready when its
// 8th-earliest GPU is free, at 11:00; node-5 at 12:00. The reservation is 11:00 on node-3.
#pragma once

#include <optional>

#include "sched/cluster_state.h"
#include "sched/demand.h"

namespace gantry {

struct EarliestStart {
  TimeMs at_ms = kNever;
  Placement placement;
};

// Whole-GPU demands use their gang shapes; a shared or MIG demand waits for one whole GPU
// of an allowed type (in MIG mode for MIG) to be free, which is conservative. GPUs already
// held by other reservations are never used.
std::optional<EarliestStart> FindEarliestStart(const ClusterState& state, const Demand& d);

}  // namespace gantry
