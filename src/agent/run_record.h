// A run's record on the node (jobs/<id>/run-<run>-<node>.json): what a restarted agent
// needs to adopt a run that kept going (its shim's pid, exit file, cgroup, MPS daemons) or
// to report one that ended while no agent listened (exit code, reason, when).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct RunRecord {
  std::string job_id;
  int run = 0;
  std::string node_id;
  int pid = 0;  // the job's shim (session and process group leader)
  TimeMs ends_at_ms = -1;
  std::string exit_file;
  int64_t memory_limit_mib = 0;
  std::string cgroup;
  std::vector<std::string> mps_gpus;           // GPUs whose MPS daemon the run holds
  std::string container;                       // the run's container (its name), if it runs in one
  std::string container_id_file;               // where the runtime wrote the container's id
  std::string start_order;                     // the order it started from (JSON): sessions run in its allocation
  std::map<std::string, std::string> mps_env;  // the MPS variables it got
  bool ended = false;
  int exit_code = -1;
  std::string reason;
  TimeMs ended_ms = -1;
};

// Writes the record to `path` (replacing it); an error names the file.
Status WriteRunRecord(const std::string& path, const RunRecord& record);
// Reads a record back; an unreadable or malformed file is an error.
Expected<RunRecord> ReadRunRecord(const std::string& path);

}  // namespace gantry
