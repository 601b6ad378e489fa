// A NodeReports that records what a node reported, for tests of the agent side: exits by
// job (with a wait), MIG changes, the latest reading of each GPU, health changes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/node_link.h"

namespace gantry::testing {

class ReportSink : public NodeReports {
 public:
  void RunStarted(const RunReport& r) override {
    std::lock_guard<std::mutex> lock(mu);
    started.push_back(r.job_id);
  }
  void RunExited(const RunReport& r) override {
    std::lock_guard<std::mutex> lock(mu);
    exits[r.job_id] = r;
    exit_times[r.job_id] = std::chrono::steady_clock::now();
    cv.notify_all();
  }
  void MigChanged(const MigReport& m) override {
    std::lock_guard<std::mutex> lock(mu);
    mig.push_back(m);
  }
  void Readings(NodeReadings readings) override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [gpu, sample] : readings.samples) last[gpu] = sample;
  }
  void GpuHealth(const GpuHealthChange& h) override {
    std::lock_guard<std::mutex> lock(mu);
    health.push_back(h);
  }
  void Reclaim(const NodeNotice& n) override {
    std::lock_guard<std::mutex> lock(mu);
    notices.push_back(n);
  }

  // The exit code of `id`, waiting up to `seconds`; -999 when it did not end.
  int WaitExit(const std::string& id, int seconds = 10) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return exits.count(id) > 0; });
    return exits.count(id) ? exits[id].exit_code : -999;
  }
  std::string Reason(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    return exits.count(id) ? exits[id].reason : "";
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> started;
  std::map<std::string, RunReport> exits;
  std::map<std::string, std::chrono::steady_clock::time_point> exit_times;
  std::vector<MigReport> mig;
  std::map<int, GpuSample> last;
  std::vector<GpuHealthChange> health;
  std::vector<NodeNotice> notices;
};

}  // namespace gantry::testing
