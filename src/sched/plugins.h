// Placement plugins. Filters answer "can this job go on this node?" (static ones look at
// the node itself, capacity ones at what is free now); scores answer "where is best?".
// Each plugin is a named function in a table, so reasons can count nodes per failed filter.
#pragma once

#include <cstdint>
#include <string>

#include "core/node.h"
#include "core/scheduler_config.h"
#include "sched/cluster_state.h"
#include "sched/demand.h"

namespace gantry {

struct FilterPlugin {
  const char* name;
  const char* failure;  // counted in reasons: "3 wrong GPU type"
  bool (*passes)(const Node& node, const NodeUse& state, const Demand& d);
};

// Filters that depend only on the node: state, GPU type, labels, taints, total size.
const FilterPlugin* StaticFilters(size_t* count);
// The first static filter the node fails, or nullptr when it passes them all.
const FilterPlugin* FailedStaticFilter(const Node& node, const NodeUse& state, const Demand& d);
// Same as FailedStaticFilter(...) == nullptr, without the node-state filter (for indexes
// that hold schedulable nodes only) and the MIG-mode one (every caller skips GPUs whose
// mode does not match the request).
bool PassesStaticFilters(const Node& node, const NodeUse& state, const Demand& d);

// What a scorer knows about one candidate node for one job.
struct ScoreInput {
  const Node* node = nullptr;
  const NodeUse* state = nullptr;
  const Demand* demand = nullptr;
  int type_rank = 0;          // position of the node's type in the job's preference order
  double fullness_after = 0;  // share of the node's (or GPU's) capacity in use after placing
  bool single_nvlink_group = true;
};

struct ScorePlugin {
  const char* name;
  int SchedulerConfig::*weight;
  double (*score)(const ScoreInput& in, const SchedulerConfig& config);  // in [0, 1]
};

// Weighted sum of all score plugins.
double ScoreNode(const ScoreInput& in, const SchedulerConfig& config);

// Chooses `k` GPUs from `mask` on node n, fewest NVLink groups first (best-fit group).
// Sets *single_group when all chosen GPUs share one group.
uint64_t ChooseGpus(const ClusterState& state, int n, uint64_t mask, int k, bool* single_group);

}  // namespace gantry
