// The priority factors: the terms of a waiting job's score in the queue order (Slurm's
// multifactor priority), each its weight (a SchedulerConfig member) times a value. They are
// a table, as the placement plugins are: a new term is one entry and its test.
//
//   age        min(1, waited / age_max)
//   size       min(1, its GPUs / the largest node's GPUs)
//   fairshare  its team's factor F (fair_share.h); a team with no entry counts as unused (1)
//   short_job  ref / (ref + its GPU-hours), from its prediction, else estimate, else limit
//   guarantee  1 while its team holds less than its guarantee, 2 once that has lasted
//              reclaim_after
#pragma once

#include <span>
#include <string>

#include "sched/queue_order.h"

namespace gantry {

// What scoring one job after another keeps: the last team's fair-share and guarantee terms
// (a queue has few teams, and a long queue's re-key would otherwise spend its time in map
// lookups).
struct TeamTerms {
  const std::string* team = nullptr;
  double fair = 0, below = 0;
};

struct PriorityFactor {
  const char* name;
  double SchedulerConfig::*weight;
  double (*value)(const PendingJob& job, const QueueContext& ctx, TeamTerms& team);
};

// age, size, fairshare, short_job, guarantee: summed in this order; a factor whose weight is
// 0 is not computed.
std::span<const PriorityFactor> PriorityFactors();

}  // namespace gantry
