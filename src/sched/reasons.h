// Why a job cannot start: counts the nodes each filter turned away and says it the way a
// person asks it ("needs 8 GPUs on one node; 0/12 nodes fit: 4 wrong GPU type, ...").
#pragma once

#include <string>

#include "sched/cluster_state.h"
#include "sched/demand.h"
#include "sched/plan.h"

namespace gantry {

struct Diagnosis {
  WaitCode code = WaitCode::kNoCapacity;
  std::string text;
};

// For a demand the placer could not place now (ignoring reservations). Without
// `with_text`, only the code is computed.
Diagnosis Diagnose(const ClusterState& state, const Demand& d, bool with_text = true);

}  // namespace gantry
