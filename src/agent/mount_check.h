// A container mount's host path as the node has it: walked from / one component at a time
// without following a symbolic link (a link anywhere in it refuses the mount, so a job cannot
// point a mount at `/` or another account's files through a link it made), and reachable by
// the job's account itself (search on every directory on the way, read, and write for a
// read-write mount): a container never reaches what its account cannot reach outside it.
// What was checked is then bound, by descriptor, at an agent-owned staging path that the
// runtime mounts, so the path cannot be changed between the check and the mount.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gantry {

// Who a mount is checked for: the job's account inside the container.
struct MountAccount {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
  bool as_root = false;       // the job runs as root: no permission check (links are refused still)
};

// What was checked: its path, and a descriptor (O_PATH) of the very file or directory,
// held until it is staged.
class CheckedMount {
 public:
  CheckedMount(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~CheckedMount();
  CheckedMount(CheckedMount&& o) noexcept : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)) {}
  CheckedMount& operator=(CheckedMount&&) = delete;
  CheckedMount(const CheckedMount&) = delete;
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_;
};

// The mount source (`host`, clean and absolute, as ParseMount gives it) once checked; the
// refusal names `field` and says what is wrong (a link, a missing path, no access).
Expected<CheckedMount> CheckMountSource(const std::string& host, bool read_only, const MountAccount& account,
                                        const std::string& field);

// Binds what was checked (through its descriptor, not its path) at `target`, a new
// directory or empty file under `dir`, which only the agent may write: the runtime mounts
// `target`, so a directory of the path swapped for a link after the check changes nothing.
// Needs CAP_SYS_ADMIN (an agent run as root); the error names `field`.
Expected<std::string> StageMount(const CheckedMount& checked, const std::string& dir, const std::string& name,
                                 const std::string& field);

// Unmounts and removes what StageMount left under `dir` (at a run's end; also for a run an
// earlier agent started).
void ReleaseStagedMounts(const std::string& dir);

}  // namespace gantry
