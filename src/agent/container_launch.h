// Running a job in an OCI container: the runtime's command line a start order becomes
// (podman by default; any runtime that takes podman's `run` flags), GPUs by CDI, and what
// fails a start with its reason instead of running a job on the wrong GPU or with
// variables the runtime would mangle.
//
// The runtime runs as the agent (root on a cluster node: rootful podman) and the job's
// processes as the job's account inside (--user UID:GID). Host networking, so a gang's
// MASTER_ADDR:MASTER_PORT and the job's named ports are the node's. The job's variables go
// through a 0600 env file, never the command line (`ps` shows that to every user).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "protocol/messages.h"

namespace gantry {

struct ContainerRuntime {
  std::string command = "podman";
  std::vector<std::string> global_options;  // before `run`, e.g. --runtime runc
  std::vector<std::string> run_options;     // after `run` (theirs win), e.g. --ulimit nproc=4096:4096
  std::vector<std::string> cdi_dirs{"/etc/cdi", "/var/run/cdi"};
  bool gpu_devices = true;  // false on fake GPUs: no devices to pass
  std::string instance;     // tells this agent's containers from another's on the same host
};

// What the container of one run is: its name (ContainerName), the files the agent
// wrote for it, and the argv that runs it (the job's shim runs it as its command).
struct ContainerLaunch {
  std::string name;
  std::string env_file;
  std::string cid_file;
  std::vector<std::string> argv;
};

struct ContainerJob {
  const StartOrder* order = nullptr;
  std::map<std::string, std::string> env;  // the job's variables (GANTRY_*, CUDA_*, MPS, container_env)
  std::string run_dir;                     // the agent's directory of this run (env file, container id)
  std::string checkpoint_dir;              // mounted at the same path
  uid_t uid = 0;                           // the account inside; 0 with `as_root`
  gid_t gid = 0;
  std::vector<gid_t> groups;  // the account's supplementary groups (--group-add), as on the node
  bool as_root = true;
  std::string mps_pipe_dir;  // mounted, with the host's IPC namespace, for MPS clients
};

// The runtime's `run` command line up to the mounts and the image: the options every job's
// container gets (host network, an init, no new privileges, the agent's limits), then
// `job_options`, then the site's run options (which win).
std::vector<std::string> ContainerRunPrefix(const ContainerRuntime& runtime,
                                            const std::vector<std::string>& job_options = {});
// Where a run's checked mounts are staged for the runtime (an agent run as root).
inline std::string StagedMountsDir(const std::string& run_dir) { return run_dir + "/mounts"; }
// The runtime's command line, after writing the env file and staging the mounts; an error (the start fails with
// it) when a GPU has no CDI spec on this node or a file cannot be written.
Expected<ContainerLaunch> PrepareContainer(const ContainerRuntime& runtime, const ContainerJob& job);
// The container name of a run: gantry-JOB-RUN-NODE-INSTANCE (a short hash of `instance`, so
// two servers or agents on one host never reach for the same name).
std::string ContainerName(const std::string& job_id, int run, const std::string& node_id, const std::string& instance);
// Removes the run's container, whatever state it is in (a stop past its grace, an agent
// that found it left over); in the background, so the agent's loop never waits on it.
void RemoveContainer(const ContainerRuntime& runtime, const std::string& name);
// Waits until the container `name` runs (at most `timeout_ms`, or until `give_up()`); whether it does.
bool WaitForContainer(const ContainerRuntime& runtime, const std::string& name, int timeout_ms,
                      const std::function<bool()>& give_up);
// The runtime's version and setup for the agent's start log ("podman 4.3.1 with runc,
// cgroups v1 (cgroupfs)"), or why container jobs will fail on this node.
std::string DescribeContainerRuntime(const ContainerRuntime& runtime);
// The id of the container a process runs in (from /proc/PID/cgroup), or empty.
std::string ContainerIdOfPid(int pid);

}  // namespace gantry
