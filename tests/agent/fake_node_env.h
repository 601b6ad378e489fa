// A node in memory for tests of the job runner (NodeRuns): accounts a test names, files and
// directories with their modes and owners, run records, taken ports, process sessions,
// cgroups (with OOM kills a test decides), MPS daemons and a container runtime that only
// record what they were asked. Faults are switches: a chown that fails, a cgroup or an MPS
// daemon that cannot be made, a runtime that refuses.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/node_env.h"

namespace gantry::testing {

class FakeNodeEnv : public NodeEnv {
 public:
  struct Dir {
    mode_t mode = 0;
    uid_t uid = 0;
    gid_t gid = 0;
  };

  // Accounts.
  bool privileged = false;
  UnixAccount self{"gantry", 990, 990};  // the runner's own account
  std::map<std::string, UnixAccount> users;
  std::map<std::string, std::vector<gid_t>> groups;  // by account name
  bool Privileged() const override { return privileged; }
  UnixAccount Self() const override { return self; }
  std::optional<UnixAccount> UserNamed(const std::string& name) const override {
    auto it = users.find(name);
    return it == users.end() ? std::nullopt : std::optional<UnixAccount>(it->second);
  }
  std::optional<UnixAccount> UserWithUid(uid_t uid) const override {
    for (const auto& [name, account] : users) {
      if (account.uid == uid) return account;
    }
    return std::nullopt;
  }
  std::vector<gid_t> GroupsOf(const UnixAccount& account) const override {
    auto it = groups.find(account.name);
    return it == groups.end() ? std::vector<gid_t>{account.gid} : it->second;
  }

  // Files.
  std::map<std::string, Dir> dirs;
  std::map<std::string, std::string> files;
  std::vector<std::string> removed;
  bool chown_fails = false;
  void MakeDir(const std::string& path, mode_t mode) override { dirs[path].mode = mode; }
  bool GiveTo(const std::string& path, uid_t uid, gid_t gid) override {
    if (chown_fails || !dirs.count(path)) return false;
    dirs[path].uid = uid;
    dirs[path].gid = gid;
    return true;
  }
  bool IsDirectory(const std::string& path) const override { return dirs.count(path) > 0; }
  bool Exists(const std::string& path) const override { return files.count(path) || dirs.count(path); }
  void Remove(const std::string& path) override {
    if (files.erase(path)) removed.push_back(path);
  }
  std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) const override {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second.substr(0, max_bytes);
  }
  std::map<std::string, RunRecord> records;  // by path
  Status WriteRunRecord(const std::string& path, const RunRecord& record) override {
    records[path] = record;
    return Status::Ok();
  }
  std::vector<std::pair<std::string, RunRecord>> RunRecords(const std::string& state_dir) const override {
    std::vector<std::pair<std::string, RunRecord>> out;
    for (const auto& [path, record] : records) {
      if (path.rfind(state_dir + "/jobs/", 0) == 0) out.emplace_back(path, record);
    }
    return out;
  }
  std::vector<std::string> capped;              // job directories whose logs were held to the cap
  std::map<std::string, std::string> last_log;  // a log's last line, by path
  void CapJobLogs(const std::string& job_dir, int64_t) override { capped.push_back(job_dir); }
  std::string LastLogLine(const std::string& path) const override {
    auto it = last_log.find(path);
    return it == last_log.end() ? "" : it->second;
  }
  std::string PortToken(const std::string&, const std::string& job_id, int run) override {
    return "token-" + job_id + "-" + std::to_string(run);
  }

  // Ports and processes.
  std::set<int> taken_ports;
  std::map<int, int> session_of;  // pid -> its session leader
  bool TcpPortFree(int port) const override { return !taken_ports.count(port); }
  int SessionOfPid(int pid) const override {
    auto it = session_of.find(pid);
    return it == session_of.end() ? -1 : it->second;
  }

  // Cgroups.
  bool cgroups = false;
  bool cgroup_fails = false;
  std::map<std::string, std::pair<int, int64_t>> cgroups_made;  // name -> cpus, memory
  std::map<std::string, int> oom_kills;
  std::vector<std::string> cgroups_removed;
  bool HasCgroups() const override { return cgroups; }
  Expected<std::string> CreateCgroup(const std::string& name, int cpus, int64_t memory_mib) override {
    if (cgroup_fails) return Status::Internal("cannot write cgroup.subtree_control: Device or resource busy");
    cgroups_made[name] = {cpus, memory_mib};
    return CgroupProcs(name);
  }
  std::string CgroupProcs(const std::string& name) const override { return "/cg/jobs/" + name + "/cgroup.procs"; }
  int CgroupOomKills(const std::string& name) const override {
    auto it = oom_kills.find(name);
    return it == oom_kills.end() ? 0 : it->second;
  }
  void RemoveCgroup(const std::string& name) override {
    cgroups_made.erase(name);
    cgroups_removed.push_back(name);
  }

  // MPS daemons.
  bool mps_fails = false;
  std::vector<std::string> mps_started, mps_quit;  // GPU uuids, in order
  Status StartMpsDaemon(const std::string& uuid, const std::string&, const std::string&) override {
    if (mps_fails) return Status::Internal("nvidia-cuda-mps-control -d failed with status 1");
    mps_started.push_back(uuid);
    return Status::Ok();
  }
  void QuitMpsDaemon(const std::string& uuid, const std::string&, const std::string&) override {
    mps_quit.push_back(uuid);
  }

  // The container runtime.
  bool container_refused = false;
  std::vector<ContainerJob> containers_prepared;
  std::vector<std::string> containers_removed, mounts_released;
  std::map<int, std::string> container_of_pid;
  Expected<ContainerLaunch> PrepareContainer(const ContainerJob& job) override {
    if (container_refused) return Status::Invalid("container_image", "no image 'missing:1' on this node");
    containers_prepared.push_back(job);
    const StartOrder& o = *job.order;
    std::string name = "gantry-" + o.job_id + "-" + std::to_string(o.run);
    return ContainerLaunch{
        name, job.run_dir + "/container.env", job.run_dir + "/container.id", {"podman", "run", "--name", name}};
  }
  void RemoveContainer(const std::string& name) override { containers_removed.push_back(name); }
  void ReleaseStagedMounts(const std::string& dir) override { mounts_released.push_back(dir); }
  std::string ContainerIdOfPid(int pid) const override {
    auto it = container_of_pid.find(pid);
    return it == container_of_pid.end() ? "" : it->second;
  }
  std::vector<std::string> ContainerExec() const override { return {"podman", "exec"}; }
};

}  // namespace gantry::testing
