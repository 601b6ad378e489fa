// Job runner options from command-line flags.
#include "cli/job_runner_setup.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "core/host.h"

namespace gantry {

Expected<JobRunnerSetup> SetUpJobRunner(const JobRunnerFlags& flags, const std::string& state_dir, GpuProvider* gpus,
                                        FakeGpuProvider* fake) {
  RunAs run_as = RunAs::kAuto;
  if (!ParseRunAs(flags.run_jobs_as, &run_as)) return Status::Invalid("--run-jobs-as", "expected auto, user or agent");
  JobRunnerSetup setup;
  std::string error;
  setup.cgroups = JobCgroups::ForMode(flags.job_cgroups, &setup.note, &error);
  if (!error.empty()) return Status::Invalid("--job-cgroups", error);
  std::error_code ec;
  setup.options = LocalAgentOptions{
      .state_dir = state_dir,
      .shim = flags.shim.empty() ? std::filesystem::read_symlink("/proc/self/exe", ec).string() : flags.shim,
      .run_as = run_as,
      .min_job_uid = static_cast<uid_t>(flags.min_job_uid),
      .mps_control = fake ? "" : kMpsControl,
      .gpus = gpus,
      .load_sink = fake,
      .cgroups = setup.cgroups.get(),
      .max_log_bytes = static_cast<int64_t>(flags.max_log_mb * 1024 * 1024)};
  ContainerRuntime& rt = setup.options.containers;
  rt.command = flags.container_runtime;
  std::istringstream options(flags.container_runtime_options);
  for (std::string o; options >> o;) rt.global_options.push_back(o);
  std::istringstream run_options(flags.container_run_options);
  for (std::string o; run_options >> o;) rt.run_options.push_back(o);
  rt.gpu_devices = fake == nullptr;  // fake GPUs have no devices to pass
  // Whether containers run here, before the node registers: it says so with its GPUs.
  setup.containers = ProbeContainerRuntime(rt, state_dir);
  rt.run_options.insert(rt.run_options.end(), setup.containers.extra_run_options.begin(),
                        setup.containers.extra_run_options.end());
  setup.note += (setup.note.empty() ? "" : "\n") + setup.containers.Line();
  return setup;
}

Expected<NodeNetwork> NodeNetworkFrom(const JobRunnerFlags& flags) {
  NodeNetwork network;
  network.address = flags.address.empty() ? Hostname() : flags.address;
  if (!ParsePortRange(flags.ports, &network.port_first, &network.port_last)) {
    return Status::Invalid("--ports", "expected FIRST-LAST within 1024-65535, e.g. 20000-29999");
  }
  if (Status s = ValidateNodeNetwork(network, "node"); !s.ok()) return Status::Invalid("--address", s.message());
  return network;
}

}  // namespace gantry
