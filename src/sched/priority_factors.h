// The priority factors: the terms of a waiting job's score in the queue order (Slurm's
// multifactor priority), each its weight (a SchedulerConfig member) times a value. They are
// a table, as the placement plugins are: a new term is an entry in queue_order.cc's
// kFactors, its weight in SchedulerConfig (and its YAML key in scheduler_config.cc), and
// its test in tests/sched/priority_factors_test.cc.
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

// When a factor's values can change the order of jobs already keyed: an ordered queue
// (ordered_queue.h) re-keys every recalc_period only if some weighted factor can.
enum class FactorMoves {
  kNever,           // all jobs' values move alike (age: the order stands)
  kOverTime,        // usage, predictions or the cluster change it
  kWithGuarantees,  // only when some team has a guarantee
};

struct PriorityFactor {
  const char* name;
  double SchedulerConfig::*weight;
  double (*value)(const PendingJob& job, const QueueContext& ctx, TeamTerms& team);
  FactorMoves moves;
};

// age, size, fairshare, short_job, guarantee: summed in this order; a factor whose weight is
// 0 is not computed.
std::span<const PriorityFactor> PriorityFactors();

}  // namespace gantry
