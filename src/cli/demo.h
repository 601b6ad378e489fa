// `gantry demo`: runs the scheduling engine over a scenario (waves of job submissions on
// an example cluster) and prints each cycle's plan, why jobs wait, and the cluster status.
#pragma once

#include <ostream>
#include <string>

namespace gantry {

struct DemoOptions {
  std::string cluster_path;   // cluster YAML (node_groups)
  std::string scenario_path;  // {start, waves: [{at, jobs: [...]}]}
  std::string config_dir;     // empty: built-in defaults
  bool json = false;          // one JSON document instead of text
};

// Returns a process exit code; errors go to `err` with the file and field at fault.
int RunDemo(const DemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
