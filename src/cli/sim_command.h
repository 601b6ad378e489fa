// `gantry sim`: loads a cluster, a trace and the config, runs one policy or several
// (--compare), prints a table, and writes the JSON and HTML reports.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/simulator.h"

namespace gantry {

struct SimCommandOptions {
  std::string cluster_path;
  std::string trace_path;
  std::string trace_format = "philly";  // philly | csv
  std::string config_dir;
  std::string json_path;
  std::string html_path;
  std::string jobs_csv_path;         // one row per job and policy
  std::string quotas_path;           // team_quotas.yaml; default: the config directory's, if any
  std::vector<std::string> compare;  // policies; empty: options.policy alone
  bool strict = false;
  SimOptions sim;
};

int RunSimCommand(const SimCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
