// The MPS control daemons of a node: one per GPU that runs MPS jobs, started (with its own
// pipe and log directories) when the first MPS job on the GPU starts and told to quit when
// the last one has ended. The GPU's compute mode is left as it is: Gantry never changes a
// card's settings (with the default mode other processes may still use the GPU directly).
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/status.h"

namespace gantry {

class NodeEnv;

// The MPS control program of NVIDIA's driver packages.
inline constexpr const char* kMpsControl = "nvidia-cuda-mps-control";

class MpsDaemons {
 public:
  // Whether this machine can run `control` (a path, or a name found on PATH): the node
  // tells the scheduler it can host MPS jobs only then.
  static bool Runnable(const std::string& control);

  // The daemons are started and told to quit through `env` (which must outlive this);
  // `dir`: where their pipe and log directories go.
  MpsDaemons(NodeEnv& env, std::string dir) : env_(env), dir_(std::move(dir)) {}

  // Job `key` uses MPS on GPU `uuid`: the daemon is started if it does not run yet.
  // Returns the pipe directory the job's clients must use.
  Expected<std::string> Acquire(const std::string& key, const std::string& uuid);
  // A job adopted after an agent restart: its GPU's daemon already runs.
  void Adopt(const std::string& key, const std::string& uuid);
  // The job ended: the daemon of a GPU no job uses any more is told to quit.
  void Release(const std::string& key);

  std::string PipeDir(const std::string& uuid) const { return dir_ + "/" + uuid + "/pipe"; }
  std::string LogDir(const std::string& uuid) const { return dir_ + "/" + uuid + "/log"; }

 private:
  NodeEnv& env_;
  std::string dir_;
  std::map<std::string, std::set<std::string>> users_;  // GPU uuid -> job keys using its daemon
};

}  // namespace gantry
