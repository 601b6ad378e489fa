// The agent's GPU watch: reads telemetry every telemetry_interval, waits for XID events in
// between, applies the health rules, and reports readings and health changes. A GPU that
// turned unhealthy is checked again every check_interval with the configured command.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "agent/gpu_provider.h"
#include "agent/health.h"
#include "protocol/node_link.h"

namespace gantry {

struct GpuLocation {
  std::string node_id;
  int index = 0;
};

class GpuMonitor {
 public:
  // Readings and health changes go to `reports`; `job_of_pid` names the job that owns a
  // process on a GPU (empty when none).
  GpuMonitor(GpuProvider& provider, HealthRules rules, std::map<std::string, GpuLocation> gpus, NodeReports& reports,
             std::function<std::string(int pid)> job_of_pid);
  ~GpuMonitor();
  void Start();
  void Stop();
  // One round now (tests): a reading and the events queued so far.
  void PollOnce();

 private:
  void Loop();
  void HandleSamples(std::vector<GpuSample> samples);
  void MarkUnhealthy(const std::string& uuid, const std::string& reason);
  void RunChecks();

  GpuProvider& provider_;
  HealthRules rules_;
  std::map<std::string, GpuLocation> gpus_;  // by UUID
  NodeReports& reports_;
  std::function<std::string(int pid)> job_of_pid_;
  std::map<std::string, std::string> unhealthy_;  // UUID -> reason
  std::map<std::string, int64_t> next_check_ms_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gantry
