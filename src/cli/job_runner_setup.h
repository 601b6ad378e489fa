// The job runner (LocalAgent) as `gantry server --standalone` and `gantry agent` both set it
// up from their flags: the shim binary, whose account jobs run under, per-job cgroups, the
// log cap, MPS daemons on real GPUs, and the GPU provider that makes MIG instances.
#pragma once

#include <memory>
#include <string>

#include "agent/cgroups.h"
#include "agent/container_probe.h"
#include "agent/fake_provider.h"
#include "agent/local_agent.h"

namespace gantry {

// The flags both commands take; the command adds where the job directories go.
struct JobRunnerFlags {
  std::string shim;                  // the gantry binary (job shim); empty: this one
  std::string run_jobs_as = "auto";  // --run-jobs-as: auto, user or agent (see RunAs)
  int64_t min_job_uid = 1000;        // --min-job-uid: a person's own account below it runs no job
  std::string job_cgroups = "auto";  // --job-cgroups: auto, required or off (see JobCgroups::ForMode)
  double max_log_mb = 1024;  // --max-log-mb: a job's logs (all runs and ranks) keep their newest part up to this
  std::string address;       // --address: how jobs on this node are reached; empty: the host name
  std::string ports = "20000-29999";         // --ports: the TCP ports this node lends to jobs
  std::string container_runtime = "podman";  // --container-runtime: runs container jobs
  std::string container_runtime_options;     // --container-runtime-options: before `run`, split at spaces
  std::string container_run_options;         // --container-run-options: after `run`, split at spaces
};

// The node's address and port range from --address and --ports; errors name the flag.
Expected<NodeNetwork> NodeNetworkFrom(const JobRunnerFlags& flags);

struct JobRunnerSetup {
  LocalAgentOptions options;
  std::unique_ptr<JobCgroups> cgroups;  // the options point into it: keep it as long as the runner
  std::string note;                     // what the cgroup mode and the container probe came to, for the log
  ContainerProbe containers;            // the node's inventory says whether containers run here
};

// Gives the inventory the container probe's verdict.
inline void NoteContainers(const ContainerProbe& probe, GpuInventory& inventory) {
  inventory.containers = probe.works;
  inventory.containers_problem = probe.problem;
}

// `gpus` makes MIG instances; `fake` (when the GPUs are fake) gets the jobs' load and means
// no MPS daemons. Errors name the flag.
Expected<JobRunnerSetup> SetUpJobRunner(const JobRunnerFlags& flags, const std::string& state_dir, GpuProvider* gpus,
                                        FakeGpuProvider* fake);

}  // namespace gantry
