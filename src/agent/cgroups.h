// Per-job cgroups (v2): each job runs in its own cgroup under the agent's cgroup, with
// cpu.max from its CPUs and memory.max from its memory, so the kernel enforces both and
// an out-of-memory job is killed alone. Used where the machine allows it: a cgroup2 mount
// whose cpu and memory controllers reach the agent's cgroup, and write access to it (root,
// or systemd's Delegate=yes). Elsewhere the agent watches host memory from /proc instead.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace gantry {

class JobCgroups {
 public:
  // `mount`: where cgroup2 is mounted; `self_cgroup`: the text of /proc/self/cgroup. Moves
  // the agent's own processes to <its cgroup>/agent (a cgroup with controllers enabled for
  // its children may hold no process), enables cpu and memory below it, and makes
  // <its cgroup>/jobs. Null with `why` when the machine does not allow it, or, with
  // `only_if_alone`, when other processes share the agent's cgroup (a login session's, say:
  // moving them would rearrange what systemd manages).
  static std::unique_ptr<JobCgroups> Open(const std::string& mount, const std::string& self_cgroup, std::string* why,
                                          bool only_if_alone = false);
  // Open on this machine: the cgroup2 mount from /proc/self/mounts and /proc/self/cgroup.
  static std::unique_ptr<JobCgroups> OpenHere(std::string* why, bool only_if_alone);
  // By the agent's --job-cgroups: "auto" (when root, alone in its cgroup, and the machine
  // allows it: a systemd service with Delegate=yes, a container), "required" (null with
  // `error` set when it cannot), "off". `note` says what was chosen and why.
  static std::unique_ptr<JobCgroups> ForMode(const std::string& mode, std::string* note, std::string* error);

  // A job's cgroup with its limits (`cpus` whole CPUs, 0: no CPU limit; `memory_mib` 0: no
  // memory limit). Returns the path of its cgroup.procs, for the job's first process.
  Expected<std::string> Create(const std::string& name, int cpus, int64_t memory_mib);
  // How many processes the kernel's OOM killer ended in the job's cgroup.
  int OomKills(const std::string& name) const;
  // Kills what is left in it and removes it.
  void Remove(const std::string& name);
  std::string Dir(const std::string& name) const { return jobs_ + "/" + name; }

 private:
  std::string jobs_;  // <agent's cgroup>/jobs
};

}  // namespace gantry
