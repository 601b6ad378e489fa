// What the node's job runner asks of the machine it runs on, in one narrow interface: Unix
// accounts, the job's files and run records, free ports, /proc, per-job cgroups, the MPS
// control daemons and the container runtime. MakeHostNodeEnv gives the machine itself; tests give
// the runner an in-memory fake (tests/agent/fake_node_env.h), the way the controller's
// state is tested without a server. Processes are the JobLauncher's (job_launcher.h).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/container_launch.h"
#include "agent/run_record.h"
#include "core/status.h"

namespace gantry {

class JobCgroups;

// A Unix account on the node.
struct UnixAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

class NodeEnv {
 public:
  virtual ~NodeEnv() = default;

  // Accounts. Whether the runner may run jobs as other users (it runs as root), and its
  // own account (uid and gid: what an unprivileged runner's jobs run as).
  virtual bool Privileged() const = 0;
  virtual UnixAccount Self() const = 0;
  virtual std::optional<UnixAccount> UserNamed(const std::string& name) const = 0;
  virtual std::optional<UnixAccount> UserWithUid(uid_t uid) const = 0;
  // The account's groups on the node, its primary group first.
  virtual std::vector<gid_t> GroupsOf(const UnixAccount& account) const = 0;

  // Files. MakeDir makes the directory and its parents and sets its mode; GiveTo changes
  // its owner (false when it cannot).
  virtual void MakeDir(const std::string& path, mode_t mode) = 0;
  virtual bool GiveTo(const std::string& path, uid_t uid, gid_t gid) = 0;
  virtual bool IsDirectory(const std::string& path) const = 0;
  virtual bool Exists(const std::string& path) const = 0;
  virtual void Remove(const std::string& path) = 0;
  // At most `max_bytes` of a file; nothing when it cannot be read.
  virtual std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) const = 0;
  // Run records (run_record.h): written whole; every record under <state_dir>/jobs/*/ read
  // back with its path (malformed ones are skipped).
  virtual Status WriteRunRecord(const std::string& path, const RunRecord& record) = 0;
  virtual std::vector<std::pair<std::string, RunRecord>> RunRecords(const std::string& state_dir) const = 0;
  // A job's logs held to `cap_bytes` (core/job_logs.h), and the last non-empty line of one.
  virtual void CapJobLogs(const std::string& job_dir, int64_t cap_bytes) = 0;
  virtual std::string LastLogLine(const std::string& path) const = 0;
  // The secret a run's ports are reached with (port_session.h).
  virtual std::string PortToken(const std::string& state_dir, const std::string& job_id, int run) = 0;

  // Ports and processes.
  virtual bool TcpPortFree(int port) const = 0;
  // The session (its leader's pid) a process is in; -1 when it is gone.
  virtual int SessionOfPid(int pid) const = 0;

  // Per-job cgroups; HasCgroups false: none (host memory is watched instead).
  virtual bool HasCgroups() const = 0;
  // Makes a job's cgroup with its limits; the path of its cgroup.procs.
  virtual Expected<std::string> CreateCgroup(const std::string& name, int cpus, int64_t memory_mib) = 0;
  virtual std::string CgroupProcs(const std::string& name) const = 0;
  virtual int CgroupOomKills(const std::string& name) const = 0;
  virtual void RemoveCgroup(const std::string& name) = 0;

  // The MPS control daemon of one GPU, with its pipe and log directories.
  virtual Status StartMpsDaemon(const std::string& uuid, const std::string& pipe_dir, const std::string& log_dir) = 0;
  virtual void QuitMpsDaemon(const std::string& uuid, const std::string& pipe_dir, const std::string& log_dir) = 0;

  // The container runtime (container_launch.h).
  virtual Expected<ContainerLaunch> PrepareContainer(const ContainerJob& job) = 0;
  virtual void RemoveContainer(const std::string& name) = 0;
  virtual void ReleaseStagedMounts(const std::string& dir) = 0;
  virtual std::string ContainerIdOfPid(int pid) const = 0;
  // The runtime's command up to `exec` (what a session in a run's container runs).
  virtual std::vector<std::string> ContainerExec() const = 0;
};

// The machine itself. `cgroups` (null: none) must outlive it; `mps_control` is the
// nvidia-cuda-mps-control command line.
std::unique_ptr<NodeEnv> MakeHostNodeEnv(JobCgroups* cgroups, std::string mps_control, ContainerRuntime containers);

}  // namespace gantry
