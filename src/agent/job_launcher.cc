// The real job launcher: `gantry job-shim` processes, their exit files and /proc.
#include "agent/job_launcher.h"

#include <signal.h>
#include <sys/wait.h>

namespace gantry {

namespace {

class RealShimLauncher : public JobLauncher {
 public:
  Expected<pid_t> Spawn(const SpawnRequest& request) override { return SpawnJob(request); }

  int Poll(pid_t pid, bool child, const std::string& exit_file) override {
    if (child) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) != pid) return -1;
      int code = ReadExitFile(exit_file);
      // No exit file: the shim itself was killed.
      if (code < 0) code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 137;
      return code;
    }
    int code = ReadExitFile(exit_file);
    if (code < 0 && IsLiveShim(pid)) return -1;
    return code < 0 ? 137 : code;
  }

  void Signal(pid_t pid, int signal) override { kill(-pid, signal); }
  int ExitStatus(const std::string& exit_file) override { return ReadExitFile(exit_file); }
  TimeMs ExitTime(const std::string& exit_file) override { return FileMtimeMs(exit_file); }
  bool IsRunning(pid_t pid) override { return IsLiveShim(pid); }
  int64_t MemoryMib(pid_t pid) override { return SessionRssMib(pid); }
};

}  // namespace

JobLauncher& ShimLauncher() {
  static RealShimLauncher launcher;
  return launcher;
}

}  // namespace gantry
