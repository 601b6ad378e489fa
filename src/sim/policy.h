// Simulator policies: each is a configuration of the one scheduling engine, never a copy
// of its logic.
//   fifo       strict submit order, classes ignored, no backfill, no preemption
//   priority   class tiers then age, no backfill, no preemption
//   backfill   priority plus EASY backfill (one reservation)
//   fairshare  backfill plus fair share in the queue order (no preemption)
//   las        least attained service (Tiresias-like): tiers at 1 and 16 GPU-hours (unless
//              configured), a job in a lower tier evicts jobs in higher tiers; backfill
//   gantry     the configuration as given (config/scheduler_config.yaml): classes, fair
//              share, backfill, preemption by priority and to reclaim guarantees
#pragma once

#include <string>
#include <vector>

#include "core/scheduler_config.h"

namespace gantry {

const std::vector<std::string>& PolicyNames();

// The engine configuration for policy `name`, derived from `base`; names the known ones
// when `name` is unknown.
Expected<SchedulerConfig> PolicyConfig(const std::string& name, const SchedulerConfig& base);

}  // namespace gantry
