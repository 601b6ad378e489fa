// How the agent starts, watches and signals a job's processes: one narrow interface with
// the real implementation (the `gantry job-shim` launcher of process.h) and fakes for tests,
// so the agent's logic (grace periods, adoption, memory limits) runs without processes.
#pragma once

#include <sys/types.h>

#include "agent/process.h"
#include "core/status.h"
#include "core/time.h"

namespace gantry {

class JobLauncher {
 public:
  virtual ~JobLauncher() = default;
  // Starts the job; returns the pid of its process group's leader (the shim).
  virtual Expected<pid_t> Spawn(const SpawnRequest& request) = 0;
  // The exit status of a run once its processes ended, or -1 while they run. `child`: the
  // shim was started by this process (it can be reaped); else it was adopted.
  virtual int Poll(pid_t pid, bool child, const std::string& exit_file) = 0;
  // Sends `signal` to the run's whole process group.
  virtual void Signal(pid_t pid, int signal) = 0;
  // A run left by an earlier agent: its exit status from the exit file (-1: none yet),
  // when it ended, and whether its shim still runs.
  virtual int ExitStatus(const std::string& exit_file) = 0;
  virtual TimeMs ExitTime(const std::string& exit_file) = 0;
  virtual bool IsRunning(pid_t pid) = 0;
  // Resident host memory (MiB) of everything in the run's session.
  virtual int64_t MemoryMib(pid_t pid) = 0;
};

// The shim launcher: real processes, exit files and /proc.
JobLauncher& ShimLauncher();

}  // namespace gantry
