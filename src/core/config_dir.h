// The configuration a Gantry process runs with: the files of a config directory where
// given, the built-in defaults (compiled from config/) otherwise.
#pragma once

#include <string>

#include "core/gpu_catalog.h"
#include "core/scheduler_config.h"

namespace gantry {

struct ConfigSet {
  GpuCatalog catalog;
  SchedulerConfig scheduler;
};

// Reads DIR/gpu_types.yaml and DIR/scheduler_config.yaml; a missing file means the
// built-in default. An empty `dir` gives the built-in defaults.
Expected<ConfigSet> LoadConfigDir(const std::string& dir);

}  // namespace gantry
