// GPU telemetry and health on the controller: readings kept in memory for the API and
// /metrics (with dcgm-exporter's names, so existing Grafana dashboards work), and health
// changes that fence a GPU, stop and requeue its jobs, and go to the node's history.
#include <fmt/format.h>

#include "protocol/inventory.h"
#include "state/controller_state.h"
#include "state/node_json.h"

namespace gantry {

void ControllerState::Readings(NodeReadings readings) {
  for (auto& [gpu, s] : readings.samples) {
    auto [n, located] = LocateGpu(readings.node_id, gpu);  // an index the node does not have is dropped
    if (!located) continue;
    accounting_.Reading(readings.node_id, gpu, s, quotas_->accounting.idle_threshold_pct, now_);
    CheckGpuMemory(n, gpu, s);
    CheckMpsFault(n, gpu, s);
    nodes_.Record(n, gpu, std::move(s), now_);
  }
}

void ControllerState::CheckMpsFault(int node, int gpu, const GpuSample& sample) {
  const NodeTable::Reading* before = nodes_.ReadingOf(node, gpu);
  if (sample.last_xid <= 0 || !before) return;
  const GpuSample& last = before->sample;
  bool counted = sample.xid_events >= 0 && last.xid_events >= 0;
  if (counted ? sample.xid_events <= last.xid_events : sample.last_xid == last.last_xid) return;  // no new XID
  std::vector<JobRecord*> clients;
  for (const std::string& id : accounting_.JobsOn(snap_.nodes[node].id, gpu)) {
    JobRecord* job = Find(id);
    if (job && job->state == JobState::kRunning &&
        HeldSharing(*job->spec, RunningOf(id).placement) == SharingMode::kMps) {
      clients.push_back(job);
    }
  }
  if (clients.empty()) return;
  const std::string& node_id = snap_.nodes[node].id;
  std::string reason = fmt::format(
      "XID {} on {} GPU {} under MPS: a fault of one MPS client reaches every client of the GPU, so its MPS "
      "jobs are requeued",
      sample.last_xid, node_id, gpu);
  NodeEvent(node_id, "mps_fault", {{"gpu", gpu}, {"xid", sample.last_xid}, {"jobs", clients.size()}});
  counters_["mps_faults"]++;
  nodes_.mps_fault_holds().insert({node, gpu});
  for (JobRecord* job : clients) StopRunning(*job, StopCause::kNodeFault, reason, 0);
}

void ControllerState::ReleaseMpsHolds() {
  std::erase_if(nodes_.mps_fault_holds(), [&](const std::pair<int, int>& held) {
    return accounting_.JobsOn(snap_.nodes[held.first].id, held.second).empty();
  });
  snap_.held_back_gpus = nodes_.mps_fault_holds();
}

void ControllerState::CheckGpuMemory(int node, int gpu, const GpuSample& sample) {
  if (sample.processes.empty()) return;
  for (const std::string& id : accounting_.JobsOn(snap_.nodes[node].id, gpu)) {
    JobRecord* job = Find(id);
    if (!job || job->state != JobState::kRunning) continue;
    const Placement& placement = RunningOf(id).placement;
    if (HeldSharing(*job->spec, placement) != SharingMode::kTimeSlice) continue;
    int64_t share = 0;
    for (const NodeShare& ns : placement.nodes) {
      for (const GpuShare& g : ns.gpus) {
        if (ns.node == node && g.gpu == gpu) share += g.memory_mib;
      }
    }
    int64_t used = 0;
    for (const GpuProcess& p : sample.processes) {
      if (p.job_id == id) used += std::max<int64_t>(0, p.used_memory_mib);
    }
    if (share > 0 && used > share) {
      StopRunning(*job, StopCause::kGpuMemory,
                  fmt::format("used {} MiB of GPU memory on {} GPU {}, over its share of {} MiB (a time-sliced GPU "
                              "is shared: ask for a larger fraction or gpu_memory_gb)",
                              used, snap_.nodes[node].id, gpu, share),
                  0);
      counters_["stopped_gpu_memory"]++;
    }
  }
}

void ControllerState::Heartbeat(const std::string& node_id) {
  if (int n = nodes_.IndexOf(node_id); n >= 0) nodes_.Heard(n, now_);
}

// The node's agent went silent: the node is down, and every job on it ends there. Those
// still running requeue as after a fault (up to max_retries); their processes on other
// nodes of a gang are stopped. A returning agent is told to stop what it still runs.
void ControllerState::NodeLost(int n) {
  Node& node = snap_.nodes[n];
  node.state = NodeState::kDown;
  nodes_.Detach(n);
  PersistNode(n);
  NodeEvent(node.id, "lost", {{"silent_ms", now_ - nodes_.LastHeard(n)}});
  counters_["node_lost"]++;
  dirty_ = true;
  std::vector<std::string> victims;
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      if (ns.node == n) victims.push_back(r.spec->id);
    }
  }
  for (const std::string& id : victims) EndOnFault(id, n, fmt::format("node {} lost (no heartbeat)", node.id), false);
}

void ControllerState::EndOnFault(const std::string& id, int n, const std::string& reason, bool stop_there) {
  JobRecord& job = *Find(id);
  if (job.stop_cause == StopCause::kNone) {
    job.stop_cause = StopCause::kNodeFault;
    job.reason = reason;
  }
  for (const NodeShare& ns : RunningOf(id).placement.nodes) {
    if (ns.node != n || stop_there)
      SendAfterCommit(ns.node, StopOrder{id, job.runs, snap_.nodes[ns.node].id, 0, reason, ""});
  }
  running_nodes_[id] = {snap_.nodes[n].id};
  DoExited(id, job.runs, snap_.nodes[n].id, -1, reason);
}

void ControllerState::GpuHealth(const GpuHealthChange& h) { DoGpuHealth(h.node_id, h.gpu, h.healthy, h.reason); }

std::pair<int, Gpu*> ControllerState::LocateGpu(const std::string& node_id, int gpu) {
  int n = nodes_.IndexOf(node_id);
  if (n < 0) return {-1, nullptr};
  Node& node = snap_.nodes[n];
  if (gpu < 0 || gpu >= static_cast<int>(node.gpus.size())) return {-1, nullptr};
  return {n, &node.gpus[gpu]};
}

void ControllerState::DoGpuHealth(const std::string& node_id, int gpu, bool healthy, const std::string& reason) {
  auto [n, located] = LocateGpu(node_id, gpu);
  if (!located) return;
  Gpu& g = *located;
  if ((g.health == GpuHealth::kHealthy) == healthy) return;
  g.health = healthy ? GpuHealth::kHealthy : GpuHealth::kUnhealthy;
  PersistNode(n);
  NodeEvent(node_id, healthy ? "gpu_healthy" : "gpu_unhealthy", {{"gpu", gpu}, {"uuid", g.uuid}, {"reason", reason}});
  counters_[healthy ? "gpu_recovered" : "gpu_unhealthy"]++;
  dirty_ = true;
  if (healthy) return;
  // The jobs on it stop now and requeue (from their checkpoints), up to max_retries.
  std::vector<std::string> victims;
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& share : ns.gpus) {
        if (ns.node == n && share.gpu == gpu) victims.push_back(r.spec->id);
      }
    }
  }
  for (const std::string& id : victims) {
    JobRecord& job = *Find(id);
    if (job.state == JobState::kRunning) {
      StopRunning(job, StopCause::kNodeFault, fmt::format("GPU {}:{} unhealthy: {}", node_id, gpu, reason),
                  options_.fault_grace_ms);
    }
  }
}

void ControllerState::MigChanged(const MigReport& change) {
  auto [n, located] = LocateGpu(change.node_id, change.gpu);
  if (!located) return;
  Gpu& g = *located;
  const GpuType& type = options_.config.catalog.Get(g.type);
  std::vector<MigInstance> actual = MigInstancesFromDevices(type, change.devices);
  if (change.error.empty()) {
    // Name the instances the plan made; later changes may already be planned on top.
    for (MigInstance& m : g.mig_instances) {
      for (const MigInstance& a : actual) {
        if (a.placement == m.placement) m.uuid = a.uuid;
      }
    }
  } else {
    // The model was wrong: take the GPU as it is (instances only on a GPU in MIG mode).
    g.mig_instances = g.mig_enabled ? actual : std::vector<MigInstance>{};
    // The job it was for, if it runs on that GPU: an agent names jobs of its own GPUs only.
    JobRecord* job = Find(change.job_id);
    bool on_this_gpu = false;
    if (job && job->state == JobState::kRunning) {
      for (const NodeShare& ns : RunningOf(job->spec->id).placement.nodes) {
        for (const GpuShare& share : ns.gpus) on_this_gpu = on_this_gpu || (ns.node == n && share.gpu == change.gpu);
      }
    }
    if (on_this_gpu) {
      job->stop_cause = StopCause::kNodeFault;
      job->reason = change.error;
      Dirty(*job);
    }
  }
  PersistNode(n);
  NodeEvent(change.node_id, change.error.empty() ? "mig_changed" : "mig_failed",
            {{"gpu", change.gpu}, {"job", change.job_id}, {"instances", actual.size()}, {"error", change.error}});
  dirty_ = true;
}

// dcgm-exporter's metric names and labels (gpu, UUID, modelName, Hostname), plus the job
// and team using the GPU.
void ControllerState::WriteGpuMetrics(MetricsWriter& w) const {
  struct Family {
    const char* name;
    const char* help;
    double (*value)(const GpuSample&);
  };
  static const Family kFamilies[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", [](const GpuSample& s) { return s.util_pct; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", [](const GpuSample& s) { return s.mem_util_pct; }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
       [](const GpuSample& s) { return static_cast<double>(s.mem_used_mib); }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
       [](const GpuSample& s) {
         return s.mem_total_mib < 0 ? -1.0 : static_cast<double>(s.mem_total_mib - s.mem_used_mib);
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", [](const GpuSample& s) { return s.temperature_c; }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", [](const GpuSample& s) { return s.power_w; }},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
       [](const GpuSample& s) { return static_cast<double>(s.sm_clock_mhz); }},
      {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
       [](const GpuSample& s) { return static_cast<double>(s.last_xid); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
       [](const GpuSample& s) { return static_cast<double>(s.ecc_corrected); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
       [](const GpuSample& s) { return static_cast<double>(s.ecc_uncorrected); }},
      {"DCGM_FI_DEV_RETIRED_DBE", "Total number of retired pages due to double-bit errors.",
       [](const GpuSample& s) { return static_cast<double>(s.retired_pages); }},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
       [](const GpuSample& s) { return static_cast<double>(s.ecc_uncorrected_lifetime); }},
      {"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned (in %).",
       [](const GpuSample& s) { return s.sm_active; }},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM (in %).",
       [](const GpuSample& s) { return s.sm_occupancy; }},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active (in %).",
       [](const GpuSample& s) { return s.tensor_active; }},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
       [](const GpuSample& s) { return s.dram_active; }},
  };
  std::map<std::pair<int, int>, std::pair<std::string, std::string>> users;  // (node, gpu) -> jobs, teams
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& g : ns.gpus) {
        auto& [jobs, teams] = users[{ns.node, g.gpu}];
        jobs += (jobs.empty() ? "" : ",") + r.spec->id;
        if (teams.find(r.spec->team) == std::string::npos) teams += (teams.empty() ? "" : ",") + r.spec->team;
      }
    }
  }
  auto labels = [&](int n, int gpu) {
    const Node& node = snap_.nodes[n];
    const auto& [jobs, teams] = users[{n, gpu}];
    return Labels{{"gpu", std::to_string(gpu)},
                  {"UUID", node.gpus[gpu].uuid},
                  {"modelName", options_.config.catalog.Get(node.gpu_type()).name},
                  {"Hostname", node.id},
                  {"job", jobs},
                  {"team", teams}};
  };
  for (const Family& f : kFamilies) {
    w.Family(f.name, "gauge", f.help);
    for (const auto& [n, gpus] : nodes_.readings()) {
      for (const auto& [gpu, reading] : gpus) {
        double v = f.value(reading.sample);
        if (v >= 0 && !reading.sample.lost) w.Sample(f.name, labels(n, gpu), v);
      }
    }
  }
  w.Family("gantry_gpu_healthy", "gauge", "1 while the GPU is healthy, 0 once a health rule fenced it");
  for (size_t n = 0; n < snap_.nodes.size(); ++n) {
    for (const Gpu& g : snap_.nodes[n].gpus) {
      w.Sample("gantry_gpu_healthy", labels(static_cast<int>(n), g.index), g.health == GpuHealth::kHealthy ? 1 : 0);
    }
  }
}

}  // namespace gantry
