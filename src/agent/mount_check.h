// A container mount's host path as the node has it: walked from / one component at a time
// without following a symbolic link (a link anywhere in it refuses the mount, so a job cannot
// point a mount at `/` or another account's files through a link it made), and reachable by
// the job's account itself (search on every directory on the way, read, and write for a
// read-write mount): a container never reaches what its account cannot reach outside it.
#pragma once

#include <sys/types.h>

#include <string>
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

// The path to mount (`host`, clean and absolute, as ParseMount gives it) once checked; the
// refusal names `field` and says what is wrong (a link, a missing path, no access).
Expected<std::string> CheckMountSource(const std::string& host, bool read_only, const MountAccount& account,
                                       const std::string& field);

}  // namespace gantry
