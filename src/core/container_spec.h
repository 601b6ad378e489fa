// What a job asks of a container: the OCI image, host directories mounted into it, the
// working directory and variables inside it, and when to pull the image. Checked at
// submit, each error naming its field (container_mounts[1]); the node agent turns it into
// a runtime command line (agent/container_launch.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

enum class PullPolicy : uint8_t { kMissing, kAlways, kNever };
const char* ToString(PullPolicy p);
bool ParsePullPolicy(const std::string& text, PullPolicy* out);

struct ContainerMount {
  std::string host;       // absolute, normalized
  std::string container;  // absolute, normalized
  bool read_only = false;
};

struct ContainerSpec {
  std::string image;                       // empty: the job runs on the node itself
  std::vector<std::string> mounts;         // "host:container[:ro|:rw]"
  std::string workdir;                     // inside the container; empty: the image's
  std::map<std::string, std::string> env;  // set inside the container only
  PullPolicy pull = PullPolicy::kMissing;

  bool enabled() const { return !image.empty(); }
};

// "/data/x:/data[:ro]" -> its parts; paths absolute, without "..", commas or control
// characters. `field` names it in errors.
Expected<ContainerMount> ParseMount(const std::string& text, const std::string& field);
// The image reference (registry/name[:tag][@digest]: letters, digits and . _ - / : @, not
// starting with '-'), the mounts, the working directory. The variables are checked with
// the job's env (job.cc).
Status ValidateContainerSpec(const ContainerSpec& c);
// Whether `host` lies under one of `roots` (each an absolute directory).
bool UnderAnyRoot(const std::string& host, const std::vector<std::string>& roots);

}  // namespace gantry
