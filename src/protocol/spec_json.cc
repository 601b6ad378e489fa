// The job spec in its submit format, as orders carry it and the store keeps it.
#include "protocol/spec_json.h"

#include <fmt/format.h>

namespace gantry {

namespace {

// A duration as a number of seconds: whole when it is, else with its milliseconds.
nlohmann::json Seconds(DurationMs d) {
  if (d % kSecondMs == 0) return d / kSecondMs;
  return static_cast<double>(d) / kSecondMs;
}

}  // namespace

nlohmann::json SpecToJson(const JobSpec& s) {
  const GpuRequest& q = s.request;
  nlohmann::json j = {
      {"user", s.user}, {"team", s.team}, {"priority", s.priority_class}, {"sharing", ToString(q.sharing)}};
  if (!s.name.empty()) j["name"] = s.name;
  if (!s.project.empty()) j["project"] = s.project;
  if (q.sharing == SharingMode::kExclusive) j["gpus"] = q.gpus;
  if (q.fractional()) j["gpu_milli"] = q.gpu_milli;
  if (q.sharing == SharingMode::kMig) j["mig_profile"] = q.mig_profile;
  if (q.mps_thread_percent > 0) j["mps_thread_percent"] = q.mps_thread_percent;
  if (q.gpu_memory_mib > 0) j["gpu_memory_gb"] = static_cast<double>(q.gpu_memory_mib) / 1024;
  if (!q.gpu_types.empty()) j["gpu_types"] = q.gpu_types;
  if (q.prefer_listed_order) j["prefer_listed_order"] = true;
  if (q.cpus > 0) j["cpus"] = q.cpus;
  if (q.memory_mib > 0) j["memory_gb"] = static_cast<double>(q.memory_mib) / 1024;
  if (q.num_nodes > 0) j["nodes"] = q.num_nodes;
  if (!s.node_selector.empty()) j["node_selector"] = s.node_selector;
  for (const LabelPreference& p : s.preferred_labels) {
    j["preferred_labels"].push_back({{"key", p.key}, {"value", p.value}, {"weight", p.weight}});
  }
  for (const Taint& t : s.tolerations) j["tolerations"].push_back(t.value.empty() ? t.key : t.key + "=" + t.value);
  if (!s.preemptible) j["preemptible"] = false;
  if (s.checkpointable) j["checkpointable"] = true;
  if (s.estimated_duration_ms > 0) j["estimated_duration_s"] = Seconds(s.estimated_duration_ms);
  if (s.time_limit_ms > 0) j["time_limit_s"] = Seconds(s.time_limit_ms);
  if (!s.request.gpu_indices.empty()) j["gpu_indices"] = s.request.gpu_indices;
  if (s.hold_gpus_ms > 0) j["hold_gpus_s"] = Seconds(s.hold_gpus_ms);
  if (!s.command.empty()) j["command"] = s.command;
  if (!s.working_dir.empty()) j["working_dir"] = s.working_dir;
  if (!s.env.empty()) j["env"] = s.env;
  j["max_retries"] = s.max_retries;
  if (s.retries_on_failure > 0) j["retries_on_failure"] = s.retries_on_failure;
  if (s.cost_limit > 0) j["cost_limit"] = s.cost_limit;
  if (!s.ports.empty()) j["ports"] = s.ports;
  if (s.container.enabled()) {
    j["container_image"] = s.container.image;
    if (!s.container.mounts.empty()) j["container_mounts"] = s.container.mounts;
    if (!s.container.workdir.empty()) j["container_workdir"] = s.container.workdir;
    if (!s.container.env.empty()) j["container_env"] = s.container.env;
    j["container_pull"] = ToString(s.container.pull);
  }
  if (!s.array.empty()) j["array"] = s.array;
  if (!s.dependency.empty()) j["dependency"] = s.dependency;
  if (!s.notify.empty()) j["notify"] = s.notify;
  if (!s.webhook.empty()) j["webhook"] = s.webhook;
  if (!s.notify_format.empty()) j["notify_format"] = s.notify_format;
  if (!s.mail_user.empty()) j["mail_user"] = s.mail_user;
  if (!s.kube_pods.empty()) j["kube_pods"] = s.kube_pods;
  return j;
}

}  // namespace gantry
