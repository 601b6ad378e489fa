// What a session in one of the node's runs needs (the run's account, environment,
// directories, cgroup and container), and the end of gantry shell's hold when its session
// ends: answered on the runs' own thread (LocalAgent's sessions ask through it).
#include <fmt/format.h>

#include "agent/node_runs.h"
#include "core/job_logs.h"
#include "protocol/order_wire.h"

namespace gantry {

Expected<SessionTarget> NodeRuns::SessionTargetFor(const StreamOrder& order) {
  auto it = runs_.find(Key(order.job_id, order.run, order.node_id));
  if (it == runs_.end()) {
    return Status::NotFound(fmt::format("run {} of job {} is not running on node {} (it ended, or has not started yet)",
                                        order.run, order.job_id, order.node_id));
  }
  ActiveRun& r = it->second;
  if (r.start_order.empty()) {
    return Status::Precondition("id",
                                "this run was adopted from an agent too old to keep its order: no sessions in it");
  }
  auto parsed = StartOrderFromJson(nlohmann::json::parse(r.start_order, nullptr, false));
  if (!parsed) return Status::Internal("the run's order cannot be read back: " + parsed.status().message());
  const StartOrder& o = *parsed;
  const bool holds = o.spec->command.empty();
  if (holds && order.kind == StreamKind::kAttach) {
    return Status::Precondition("id", fmt::format("job {} holds GPUs and runs no command: nothing to attach to "
                                                  "(gantry exec {} -- CMD, or gantry shell)",
                                                  order.job_id, order.job_id));
  }
  auto account = JobAccount(o);
  if (!account) return account.status();
  if (order.kind == StreamKind::kPort) {
    // Only a port lent to this run on this node, whatever the order says.
    SessionTarget t;
    for (const auto& [name, number] : o.ports) {
      if (number == order.port && name != "master") t.port_name = name;
    }
    if (t.port_name.empty()) {
      return Status(StatusCode::kPermissionDenied, fmt::format("port {} is not one of job {}'s named ports on node {}",
                                                               order.port, order.job_id, order.node_id));
    }
    t.port = order.port;
    t.uid = account->uid;
    return t;
  }
  if (Status made = MakeJobDirs(o, *account); !made.ok()) return made;
  const std::string dir = JobDir(o.job_id);
  SessionTarget t;
  t.shim = options_.shim;
  t.user = account->name;
  t.env = JobEnvironment(o, dir + "/checkpoint");
  if (!o.ports.empty()) t.env["GANTRY_PORT_TOKEN"] = env_.PortToken(options_.state_dir, o.job_id, o.run);
  t.env.insert(r.mps_env.begin(), r.mps_env.end());
  t.working_dir = dir + "/work";
  t.job_working_dir = o.spec->working_dir;  // entered with the job's rights (process.h)
  if (env_.HasCgroups()) {
    if (r.cgroup.empty()) {  // a job that only holds GPUs gets its cgroup with its first session
      std::string name = fmt::format("{}-{}-{}", o.job_id, o.run, o.node_id);
      auto procs = env_.CreateCgroup(name, o.cpus, o.memory_mib);
      if (!procs) return procs.status();
      r.cgroup = name;
    }
    t.cgroup_procs = env_.CgroupProcs(r.cgroup);
  }
  if (!r.container.empty()) {
    t.container_exec = env_.ContainerExec();
    t.container = r.container;
  }
  t.exit_file = fmt::format("{}/session-{}.exit", dir, order.session.substr(0, 16));
  t.run_exit_file = r.exit_file;
  t.stdout_log = RunLogPath(dir, o.run, o.node_rank, "stdout");
  t.stderr_log = RunLogPath(dir, o.run, o.node_rank, "stderr");
  return t;
}

void NodeRuns::EndHold(const std::string& key, int exit_code) {
  auto it = runs_.find(key);
  if (it == runs_.end() || it->second.pid > 0) return;  // only a run that holds GPUs without a process
  it->second.ends_at_ms = Now();
  it->second.hold_exit = exit_code;
}

}  // namespace gantry
