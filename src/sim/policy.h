// Simulator policies: each is a configuration of the one scheduling engine, never a copy
// of its logic. fifo: strict submit order, no backfill, classes ignored. priority: class
// tiers then age, no backfill. backfill: priority plus EASY backfill (one reservation).
// gantry: the configuration as given (config/scheduler_config.yaml), the project's default.
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
