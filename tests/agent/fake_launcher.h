// Test seams of the node side: a job launcher without processes (spawns are recorded,
// signals too, and a test decides when a run exits and how much memory it holds) and a
// clock moved by hand.
#pragma once

#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "agent/job_launcher.h"
#include "core/clock.h"

namespace gantry::testing {

class ManualClock : public Clock {
 public:
  explicit ManualClock(TimeMs start) : now_(start) {}
  TimeMs NowMs() const override { return now_; }
  void Advance(DurationMs d) { now_ += d; }

 private:
  std::atomic<TimeMs> now_;
};

class FakeLauncher : public JobLauncher {
 public:
  Expected<pid_t> Spawn(const SpawnRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (refuse_) return Status::Internal("cannot fork: out of processes");
    pid_t pid = next_pid_++;
    spawned_.push_back({pid, request});
    exit_[pid] = -1;
    return pid;
  }
  int Poll(pid_t pid, bool, const std::string&) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = exit_.find(pid);
    return it == exit_.end() ? 137 : it->second;
  }
  // SIGKILL ends a run at once (128 + 9); SIGTERM is only recorded.
  void Signal(pid_t pid, int signal) override {
    std::lock_guard<std::mutex> lock(mu_);
    signals_.emplace_back(pid, signal);
    if (signal == SIGKILL && exit_.count(pid) && exit_[pid] < 0) exit_[pid] = 137;
  }
  int ExitStatus(const std::string&) override { return -1; }
  TimeMs ExitTime(const std::string&) override { return -1; }
  bool IsRunning(pid_t pid) override {
    std::lock_guard<std::mutex> lock(mu_);
    return exit_.count(pid) && exit_[pid] < 0;
  }
  int64_t MemoryMib(pid_t pid) override {
    std::lock_guard<std::mutex> lock(mu_);
    return memory_[pid];
  }

  // Test controls.
  void Exit(pid_t pid, int code) {
    std::lock_guard<std::mutex> lock(mu_);
    exit_[pid] = code;
  }
  void SetMemory(pid_t pid, int64_t mib) {
    std::lock_guard<std::mutex> lock(mu_);
    memory_[pid] = mib;
  }
  void RefuseSpawns() {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = true;
  }
  std::vector<std::pair<pid_t, SpawnRequest>> spawned() {
    std::lock_guard<std::mutex> lock(mu_);
    return spawned_;
  }
  std::vector<std::pair<pid_t, int>> signals() {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_;
  }

 private:
  std::mutex mu_;
  pid_t next_pid_ = 40000;
  bool refuse_ = false;
  std::vector<std::pair<pid_t, SpawnRequest>> spawned_;
  std::vector<std::pair<pid_t, int>> signals_;
  std::map<pid_t, int> exit_;
  std::map<pid_t, int64_t> memory_;
};

}  // namespace gantry::testing
