// Whether this node can run container jobs, found out at agent start rather than by the
// first job that fails: a throw-away container (a root tree of /bin/sh and its libraries,
// run with --rootfs, so no image or registry is needed) is started with the options jobs
// get. Where the runtime's defaults fail (e.g. runc refusing the agent's own process limit
// in a nested sandbox: "error setting rlimit type 6: operation not permitted"), explicit
// limits are tried and kept when they work; when nothing works the node says why and the
// scheduler places no container job on it.
#pragma once

#include <string>
#include <vector>

#include "agent/container_launch.h"

namespace gantry {

struct ContainerProbe {
  bool works = false;
  std::vector<std::string> extra_run_options;  // added to the runtime's run options (found to be needed)
  std::string runtime;                         // "podman version 4.3.1 with runc, cgroups v2 (systemd)"
  std::string problem;                         // why containers do not run here (one line)
  // The agent's start line: "containers: podman ... (a probe container ran[ with ...])" or why not.
  std::string Line() const;
};

// Starts a probe container with `runtime`'s options (each try at most `timeout_s`), in a
// root tree made under `work_dir`.
ContainerProbe ProbeContainerRuntime(const ContainerRuntime& runtime, const std::string& work_dir, int timeout_s = 60);

}  // namespace gantry
