// MPS control daemons, run through nvidia-cuda-mps-control (docs.nvidia.com/deploy/mps).
#include "agent/mps_daemons.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace gantry {

namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

bool MpsDaemons::Runnable(const std::string& control) {
  std::string program = control.substr(0, control.find(' '));
  if (program.empty()) return false;
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Runs the control program for one GPU's daemon with `args`, feeding it `input`; returns
// its exit status.
int MpsDaemons::Control(const std::string& uuid, const std::string& args, const std::string& input) {
  // `control_` is a command line from the agent's configuration (a program and its arguments).
  std::string cmd = fmt::format("CUDA_VISIBLE_DEVICES={} CUDA_MPS_PIPE_DIRECTORY={} CUDA_MPS_LOG_DIRECTORY={} {} {}",
                                Quote(uuid), Quote(PipeDir(uuid)), Quote(LogDir(uuid)), control_, args);
  FILE* p = popen(cmd.c_str(), "w");
  if (!p) return -1;
  if (!input.empty()) std::fwrite(input.data(), 1, input.size(), p);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Expected<std::string> MpsDaemons::Acquire(const std::string& key, const std::string& uuid) {
  std::set<std::string>& users = users_[uuid];
  if (users.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(PipeDir(uuid), ec);
    std::filesystem::create_directories(LogDir(uuid), ec);
    if (ec) return Status::Internal("cannot create the MPS directories under " + dir_ + ": " + ec.message());
    int rc = Control(uuid, "-d", "");
    if (rc != 0) {
      users_.erase(uuid);
      return Status::Internal(
          fmt::format("starting the MPS control daemon for {} ({} -d) failed with status {}", uuid, control_, rc));
    }
  }
  users.insert(key);
  return PipeDir(uuid);
}

void MpsDaemons::Adopt(const std::string& key, const std::string& uuid) { users_[uuid].insert(key); }

void MpsDaemons::Release(const std::string& key) {
  for (auto it = users_.begin(); it != users_.end();) {
    if (it->second.erase(key) && it->second.empty()) {
      Control(it->first, "", "quit\n");
      it = users_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gantry
