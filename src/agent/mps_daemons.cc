// MPS control daemons: which GPUs' daemons run and which runs use each (the daemons
// themselves are started through the node's NodeEnv: nvidia-cuda-mps-control).
#include "agent/mps_daemons.h"

#include <unistd.h>

#include <cstdlib>

#include "agent/node_env.h"

namespace gantry {

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

Expected<std::string> MpsDaemons::Acquire(const std::string& key, const std::string& uuid) {
  std::set<std::string>& users = users_[uuid];
  if (users.empty()) {
    if (Status started = env_.StartMpsDaemon(uuid, PipeDir(uuid), LogDir(uuid)); !started.ok()) {
      users_.erase(uuid);
      return started;
    }
  }
  users.insert(key);
  return PipeDir(uuid);
}

void MpsDaemons::Adopt(const std::string& key, const std::string& uuid) { users_[uuid].insert(key); }

void MpsDaemons::Release(const std::string& key) {
  for (auto it = users_.begin(); it != users_.end();) {
    if (it->second.erase(key) && it->second.empty()) {
      env_.QuitMpsDaemon(it->first, PipeDir(it->first), LogDir(it->first));
      it = users_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gantry
