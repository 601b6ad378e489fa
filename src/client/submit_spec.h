// What `gantry submit` and `gantry run` share: the job's flags, the spec they build (a
// profile, then a job file, then the flags, each overriding the one before), and the
// submit request, retried with one Idempotency-Key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "client/http_client.h"

namespace gantry {

// A job as flags; empty or negative: not given.
struct SubmitFlags {
  std::string file, jobs_file, profile, name, project, priority, sharing, mig, time_limit, estimate, workdir, key;
  std::string user, team, array, dependency, hold_gpus;
  std::string notify, mail_type, webhook, notify_format, mail_user;
  std::string container_image, container_workdir, container_pull;
  std::vector<std::string> container_mounts, container_env;
  int gpus = -1, cpus = -1, nodes = -1, mps_thread_percent = -1, retries = -1, fault_retries = -1;
  double fraction = -1, memory_gb = -1, gpu_memory_gb = -1, cost_limit = -1;
  std::vector<std::string> gpu_types, env, command, node_selector, prefer_labels, tolerations, ports;
  std::vector<int> gpu_indices;
  bool checkpointable = false, not_preemptible = false, prefer_listed_order = false, hold = false;
};

void AddSubmitOptions(CLI::App* c, SubmitFlags& f);
// The spec as YAML (ready for POST /v1/jobs), or the error naming the flag or file at fault.
Expected<YAML::Node> BuildSpec(const SubmitFlags& f, const ClientConfig& cfg);
// A random Idempotency-Key.
std::string RandomKey();
// Posts a spec (POST /v1/jobs) or a batch (/v1/jobs/batch); a lost connection is retried
// with the same Idempotency-Key.
Expected<HttpAnswer> PostJob(ApiClient& api, const std::string& path, const std::string& body, const std::string& key);
// Submits the one job of `f` (run where it was submitted from, unless it says otherwise)
// for a command that follows it (run, shell): the server's answer for the new job, or
// null after saying why on `err`, with the exit status to give in `rc` (2: the flags, 1:
// the server refused or could not be reached).
std::optional<nlohmann::json> SubmitToFollow(ApiClient& api, const SubmitFlags& f, const ClientConfig& cfg,
                                             std::ostream& err, int* rc);

}  // namespace gantry
