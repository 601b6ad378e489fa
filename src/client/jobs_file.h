// The one-job-per-line format of single-machine GPU queues:
//   priority,script,conda_env,arguments,allowed_gpus
// priority: a class name (low, medium, high, critical) or a number (0 low, 1 medium,
// 2 high, 3 or more critical); script: run with python when it ends in .py, bash when
// .sh, else executed; conda_env: when set, run inside it with `conda run -n`;
// arguments: passed to the script; allowed_gpus: GPU types separated by ';' or '|', or a
// number of GPUs (default 1). Fields may be double-quoted (to hold commas); lines
// starting with '#' and a header line are skipped.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

struct JobsFileLine {
  int line = 0;
  YAML::Node spec;  // fields for POST /v1/jobs
};

// Quotes `s` for /bin/sh when it holds anything but plain word characters.
std::string ShellQuote(const std::string& s);

Expected<std::vector<JobsFileLine>> ParseJobsFile(const std::string& path);
Expected<std::vector<JobsFileLine>> ParseJobsText(const std::string& text, const std::string& name);

}  // namespace gantry
