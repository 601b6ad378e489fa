// The configuration a Gantry process runs with: the files of a config directory where
// given, the built-in defaults (compiled from config/) otherwise.
#pragma once

#include <string>

#include "core/gpu_catalog.h"
#include "core/quota_config.h"
#include "core/scheduler_config.h"

namespace gantry {

struct ConfigSet {
  GpuCatalog catalog;
  SchedulerConfig scheduler;
  QuotaConfig quotas;          // no teams, no limits unless DIR/team_quotas.yaml says so
  std::string gpu_types_yaml;  // the text the catalog came from (its `pricing` section is billing's)
};

// Reads DIR/gpu_types.yaml, DIR/scheduler_config.yaml and DIR/team_quotas.yaml; a missing
// file means the built-in default. An empty `dir` gives the built-in defaults.
Expected<ConfigSet> LoadConfigDir(const std::string& dir);

// Default data directory: $GANTRY_DATA_DIR, else $XDG_DATA_HOME/gantry, else ~/.local/share/gantry.
std::string DefaultDataDir();

}  // namespace gantry
