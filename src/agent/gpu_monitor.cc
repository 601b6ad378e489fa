// GPU telemetry and health watch.
#include "agent/gpu_monitor.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>

#include "core/shell_quote.h"

namespace gantry {

namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

GpuMonitor::GpuMonitor(GpuProvider& provider, HealthRules rules, std::map<std::string, GpuLocation> gpus,
                       NodeReports& reports, std::function<std::string(int pid)> job_of_pid)
    : provider_(provider),
      rules_(std::move(rules)),
      gpus_(std::move(gpus)),
      reports_(reports),
      job_of_pid_(std::move(job_of_pid)) {}

GpuMonitor::~GpuMonitor() { Stop(); }

void GpuMonitor::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void GpuMonitor::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void GpuMonitor::Loop() {
  int64_t next_sample = 0;
  while (!stop_) {
    int64_t now = SteadyMs();
    if (now >= next_sample) {
      auto samples = provider_.Sample();
      if (samples) HandleSamples(std::move(*samples));
      RunChecks();
      next_sample = now + rules_.telemetry_interval_ms;
    }
    int wait = static_cast<int>(std::min<int64_t>(200, std::max<int64_t>(1, next_sample - SteadyMs())));
    for (const GpuEvent& e : provider_.Events(wait)) {
      if (e.xid == 0) continue;
      std::string why = XidReason(e.xid, rules_);
      if (!why.empty()) MarkUnhealthy(e.uuid, why);
    }
  }
}

void GpuMonitor::PollOnce() {
  for (const GpuEvent& e : provider_.Events(0)) {
    std::string why = e.xid ? XidReason(e.xid, rules_) : "";
    if (!why.empty()) MarkUnhealthy(e.uuid, why);
  }
  auto samples = provider_.Sample();
  if (samples) HandleSamples(std::move(*samples));
  RunChecks();
}

void GpuMonitor::HandleSamples(std::vector<GpuSample> samples) {
  std::map<std::string, std::vector<std::pair<int, GpuSample>>> by_node;
  for (GpuSample& s : samples) {
    auto at = gpus_.find(s.uuid);
    if (at == gpus_.end()) continue;
    std::string why = UnhealthyReason(s, rules_);
    if (!why.empty()) MarkUnhealthy(s.uuid, why);
    if (job_of_pid_) {
      for (GpuProcess& p : s.processes) p.job_id = job_of_pid_(p.pid);
    }
    by_node[at->second.node_id].emplace_back(at->second.index, std::move(s));
  }
  for (auto& [node, list] : by_node) reports_.Readings({node, std::move(list)});
}

void GpuMonitor::MarkUnhealthy(const std::string& uuid, const std::string& reason) {
  auto at = gpus_.find(uuid);
  if (at == gpus_.end() || unhealthy_.count(uuid)) return;
  unhealthy_[uuid] = reason;
  next_check_ms_[uuid] = SteadyMs() + rules_.check_interval_ms;
  reports_.GpuHealth({at->second.node_id, at->second.index, false, reason});
}

// An unhealthy GPU returns when the check command passes and its reading is clean.
void GpuMonitor::RunChecks() {
  if (rules_.check_command.empty()) return;
  int64_t now = SteadyMs();
  for (auto it = unhealthy_.begin(); it != unhealthy_.end();) {
    const std::string& uuid = it->first;
    if (now < next_check_ms_[uuid]) {
      ++it;
      continue;
    }
    next_check_ms_[uuid] = now + rules_.check_interval_ms;
    std::string cmd =
        fmt::format("export GANTRY_GPU_UUID={}; {} >/dev/null 2>&1", ShellQuote(uuid), rules_.check_command);
    int rc = std::system(cmd.c_str());
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
      ++it;
      continue;
    }
    const GpuLocation& at = gpus_.at(uuid);
    reports_.GpuHealth({at.node_id, at.index, true, "the health check passed"});
    it = unhealthy_.erase(it);
  }
}

}  // namespace gantry
