// Job states and the JSON forms of a job.
#include "state/job_record.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/spec_yaml.h"
#include "sched/usage.h"

namespace gantry {

namespace {

constexpr const char* kStateNames[] = {"pending", "running", "stopping", "succeeded", "failed", "cancelled"};
constexpr const char* kStopNames[] = {"",           "cancel", "preempt",    "time_limit", "node_fault",
                                      "cost_limit", "idle",   "gpu_memory", "reclaim"};

std::string Utc(TimeMs t) { return t < 0 ? "" : FormatUtc(t); }

nlohmann::json ShareToJson(const GpuShare& g) {
  nlohmann::json j = {{"gpu", g.gpu}, {"milli", g.milli}};
  if (g.mps_thread_percent > 0) j["mps_thread_percent"] = g.mps_thread_percent;
  if (g.memory_mib > 0) j["memory_mib"] = g.memory_mib;
  if (g.mig_profile >= 0) {
    j["mig_profile"] = g.mig_profile;
    j["mig_start"] = g.mig_start;
  }
  return j;
}

GpuShare ShareFromJson(const nlohmann::json& j) {
  GpuShare g;
  g.gpu = j.at("gpu").get<int>();
  g.milli = j.at("milli").get<int32_t>();
  g.mps_thread_percent = j.value("mps_thread_percent", 0);
  g.memory_mib = j.value("memory_mib", int64_t{0});
  g.mig_profile = j.value("mig_profile", -1);
  g.mig_start = j.value("mig_start", -1);
  return g;
}

}  // namespace

const char* ToString(JobState s) { return kStateNames[static_cast<int>(s)]; }
const char* ToString(StopCause c) { return kStopNames[static_cast<int>(c)]; }

bool ParseJobState(const std::string& text, JobState* out) {
  for (int i = 0; i < 6; ++i) {
    if (text == kStateNames[i]) {
      *out = static_cast<JobState>(i);
      return true;
    }
  }
  return false;
}

double ShareOfGpu(const GpuShare& g, const GpuType& type) {
  if (g.mig_profile >= 0 && type.mig_compute_slices > 0) {
    return static_cast<double>(type.mig_profiles[g.mig_profile].compute_slices) / type.mig_compute_slices;
  }
  return g.milli / 1000.0;
}

nlohmann::json PlacementToJson(const Placement& p, const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  nlohmann::json out = nlohmann::json::array();
  for (const NodeShare& ns : p.nodes) {
    const Node& node = nodes[ns.node];
    const GpuType& type = catalog.Get(node.gpu_type());
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuShare& g : ns.gpus) {
      nlohmann::json gj = {{"index", g.gpu}, {"uuid", node.gpus[g.gpu].uuid}, {"share", ShareOfGpu(g, type)}};
      if (g.mig_profile >= 0) gj["mig_profile"] = type.mig_profiles[g.mig_profile].name;
      if (g.mps_thread_percent > 0) gj["mps_thread_percent"] = g.mps_thread_percent;
      if (g.memory_mib > 0) gj["memory_mib"] = g.memory_mib;
      gpus.push_back(std::move(gj));
    }
    out.push_back(
        {{"node", node.id}, {"gpu_type", type.name}, {"gpus", gpus}, {"cpus", ns.cpus}, {"memory_mib", ns.memory_mib}});
  }
  return out;
}

nlohmann::json JobToDoc(const JobRecord& job, const JobSchedule& schedule, const std::vector<Node>& nodes) {
  nlohmann::json placement = nlohmann::json::array();
  static const Placement kNone;
  for (const NodeShare& ns : (schedule.placement ? *schedule.placement : kNone).nodes) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuShare& g : ns.gpus) gpus.push_back(ShareToJson(g));
    placement.push_back(
        {{"node", nodes[ns.node].id}, {"gpus", gpus}, {"cpus", ns.cpus}, {"memory_mib", ns.memory_mib}});
  }
  nlohmann::json ports = nlohmann::json::array();
  for (const JobPort& p : job.ports) ports.push_back({{"name", p.name}, {"node", nodes[p.node].id}, {"port", p.port}});
  return {{"seq", job.seq},
          {"spec", SpecToJson(*job.spec)},
          {"ports", ports},
          {"state", ToString(job.state)},
          {"submit_ms", job.submit_ms},
          {"start_ms", job.start_ms},
          {"first_start_ms", job.first_start_ms},
          {"end_ms", job.end_ms},
          {"runs", job.runs},
          {"evictions", job.evictions},
          {"fault_retries", job.fault_retries},
          {"failure_retries", job.failure_retries},
          {"attained_gpu_ms", job.attained_gpu_ms},
          {"exit_code", job.exit_code},
          {"reason", job.reason},
          {"stop_cause", static_cast<int>(job.stop_cause)},
          {"stop_at_ms", schedule.stop_at_ms},
          {"nominated", schedule.nominated},
          {"closed_cost", job.closed_cost},
          {"cost_alert", job.cost_alert},
          {"idle_flagged", job.idle_flagged},
          {"hold", job.hold},
          {"array_id", job.array_id},
          {"array_task", job.array_task},
          {"array_limit", job.array_limit},
          {"placement", placement},
          {"placement_sharing", ToString(schedule.placement ? schedule.placement->sharing : SharingMode::kExclusive)}};
}

Expected<LoadedJob> JobFromDoc(const nlohmann::json& doc, const std::function<int(const std::string&)>& node_index) {
  try {
    LoadedJob loaded;
    JobRecord& j = loaded.record;
    j.seq = doc.at("seq").get<uint64_t>();
    auto spec = ParseJobSpec(YAML::Load(doc.at("spec").dump(-1, ' ', false, kReplaceBadUtf8)));
    if (!spec) return Status::Internal(fmt::format("stored job {}: {}", j.seq, spec.status().ToString()));
    spec->id = std::to_string(j.seq);
    j.spec = std::make_shared<const JobSpec>(std::move(*spec));
    if (!ParseJobState(doc.at("state").get<std::string>(), &j.state)) {
      return Status::Internal(fmt::format("stored job {}: bad state", j.seq));
    }
    j.submit_ms = doc.at("submit_ms").get<TimeMs>();
    j.start_ms = doc.at("start_ms").get<TimeMs>();
    j.first_start_ms = doc.at("first_start_ms").get<TimeMs>();
    j.end_ms = doc.at("end_ms").get<TimeMs>();
    j.runs = doc.at("runs").get<int>();
    j.evictions = doc.at("evictions").get<int>();
    j.fault_retries = doc.at("fault_retries").get<int>();
    j.failure_retries = doc.at("failure_retries").get<int>();
    j.attained_gpu_ms = doc.at("attained_gpu_ms").get<double>();
    j.exit_code = doc.at("exit_code").get<int>();
    j.reason = doc.at("reason").get<std::string>();
    j.stop_cause = static_cast<StopCause>(doc.at("stop_cause").get<int>());
    loaded.stop_at_ms = doc.at("stop_at_ms").get<TimeMs>();
    loaded.nominated = doc.at("nominated").get<bool>();
    j.closed_cost = doc.value("closed_cost", 0.0);  // absent in documents written before accounting
    j.cost_alert = doc.value("cost_alert", 0);
    j.idle_flagged = doc.value("idle_flagged", false);
    j.hold = doc.value("hold", "");
    j.array_id = doc.value("array_id", uint64_t{0});
    j.array_task = doc.value("array_task", -1);
    j.array_limit = doc.value("array_limit", 0);
    if (!j.spec->dependency.empty()) {
      auto after = ParseDependency(j.spec->dependency);
      if (!after) return Status::Internal(fmt::format("stored job {}: {}", j.seq, after.status().ToString()));
      j.after = std::move(*after);
    }
    for (const nlohmann::json& ns : doc.at("placement")) {
      NodeShare share;
      share.node = node_index(ns.at("node").get<std::string>());
      if (share.node < 0) return Status::Internal(fmt::format("stored job {}: unknown node", j.seq));
      for (const nlohmann::json& g : ns.at("gpus")) share.gpus.push_back(ShareFromJson(g));
      share.cpus = ns.at("cpus").get<int>();
      share.memory_mib = ns.at("memory_mib").get<int64_t>();
      loaded.placement.nodes.push_back(std::move(share));
    }
    for (const nlohmann::json& p : doc.value("ports", nlohmann::json::array())) {
      JobPort port{p.at("name").get<std::string>(), node_index(p.at("node").get<std::string>()),
                   p.at("port").get<int>()};
      if (port.node < 0) return Status::Internal(fmt::format("stored job {}: unknown node", j.seq));
      j.ports.push_back(std::move(port));
    }
    // The mode chosen for a plain fraction (older documents: the job's own mode).
    if (!ParseSharingMode(doc.value("placement_sharing", std::string()), &loaded.placement.sharing) ||
        loaded.placement.sharing == SharingMode::kAuto) {
      loaded.placement.sharing =
          j.spec->request.sharing == SharingMode::kAuto ? SharingMode::kTimeSlice : j.spec->request.sharing;
    }
    return loaded;
  } catch (const std::exception& e) {
    return Status::Internal(std::string("stored job document: ") + e.what());
  }
}

namespace {

// The job's ports as users reach them: MASTER_ADDR:MASTER_PORT, and a URL per named port.
nlohmann::json PortsToApi(const std::vector<JobPort>& ports, const std::vector<Node>& nodes) {
  nlohmann::json out = nlohmann::json::array();
  for (const JobPort& p : ports) {
    const std::string& host = nodes[p.node].address();
    std::string where = host.find(':') != std::string::npos ? "[" + host + "]" : host;  // IPv6
    nlohmann::json port = {{"name", p.name}, {"node", nodes[p.node].id}, {"address", host}, {"port", p.port}};
    if (p.name != "master") port["url"] = fmt::format("http://{}:{}", where, p.port);
    out.push_back(std::move(port));
  }
  return out;
}

}  // namespace

nlohmann::json JobToApi(const JobRecord& job, const JobSchedule& schedule, const std::vector<Node>& nodes,
                        const GpuCatalog& catalog, bool full) {
  const JobSpec& s = *job.spec;
  nlohmann::json spec = SpecToJson(s);
  if (!full) {
    spec.erase("command");
    spec.erase("env");
    spec.erase("working_dir");
    spec.erase("webhook");
    spec.erase("mail_user");
  }
  nlohmann::json j = {{"id", s.id},
                      {"name", s.name},
                      {"user", s.user},
                      {"team", s.team},
                      {"project", s.project},
                      {"priority", s.priority_class},
                      {"state", ToString(job.state)},
                      {"submitted_at", Utc(job.submit_ms)},
                      {"started_at", Utc(job.start_ms)},
                      {"ended_at", Utc(job.end_ms)},
                      {"runs", job.runs},
                      {"evictions", job.evictions},
                      {"spec", spec}};
  if (job.exit_code >= 0) j["exit_code"] = job.exit_code;
  if (!job.hold.empty()) j["held"] = job.hold;
  if (job.array_id > 0) {
    j["array_job_id"] = std::to_string(job.array_id);
    j["array_task_id"] = job.array_task;
  }
  if (!job.reason.empty()) j["reason"] = job.reason;
  if (job.state == JobState::kStopping) {
    j["stop_cause"] = ToString(job.stop_cause);
    j["stop_at"] = Utc(schedule.stop_at_ms == kNever ? -1 : schedule.stop_at_ms);
  }
  if (schedule.placement && !schedule.placement->nodes.empty() &&
      (job.state == JobState::kRunning || job.state == JobState::kStopping)) {
    j["placement"] = PlacementToJson(*schedule.placement, nodes, catalog);
    j["gpu_share"] = PlacementShare(*schedule.placement, s.request.sharing);
    j["sharing"] = ToString(HeldSharing(s, *schedule.placement));
    if (!job.ports.empty()) j["ports"] = PortsToApi(job.ports, nodes);
  }
  return j;
}

}  // namespace gantry
