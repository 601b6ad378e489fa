// Runs node pools' hook commands (scale-up, scale-down) each on a thread of its own, so a
// hook that hangs holds neither the scheduler nor another pool's hook; each is killed at
// its timeout. The result goes to the callback, from the hook's thread.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "core/command.h"
#include "state/autoscaling.h"

namespace gantry {

class PoolHooks {
 public:
  using Done = std::function<void(const HookCall&, const CommandResult&)>;
  PoolHooks() = default;
  ~PoolHooks() { Stop(); }
  PoolHooks(const PoolHooks&) = delete;
  PoolHooks& operator=(const PoolHooks&) = delete;

  // Starts `call`; `done` gets its result (not after Stop has returned).
  void Run(HookCall call, Done done);
  // Kills the hooks still running and waits for their threads.
  void Stop();

 private:
  struct Running {
    std::thread thread;
    std::atomic<bool> finished{false};
  };
  std::mutex mu_;
  std::list<Running> running_;
  std::atomic<bool> stopping_{false};
};

}  // namespace gantry
