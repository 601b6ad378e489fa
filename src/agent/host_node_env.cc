// NodeEnv on the machine itself: passwd and group files, the filesystem, /proc, cgroup v2,
// nvidia-cuda-mps-control and podman (or the runtime the agent is given).
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "agent/cgroups.h"
#include "agent/mount_check.h"
#include "agent/node_env.h"
#include "agent/port_session.h"
#include "core/host.h"
#include "core/job_logs.h"
#include "core/log_window.h"
#include "core/read_file.h"
#include "core/shell_quote.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

std::optional<UnixAccount> AccountOf(const struct passwd* pw) {
  if (!pw) return std::nullopt;
  return UnixAccount{pw->pw_name, pw->pw_uid, pw->pw_gid};
}

class HostNodeEnv : public NodeEnv {
 public:
  HostNodeEnv(JobCgroups* cgroups, std::string mps_control, ContainerRuntime containers)
      : cgroups_(cgroups), mps_control_(std::move(mps_control)), containers_(std::move(containers)) {}

  bool Privileged() const override { return geteuid() == 0; }
  UnixAccount Self() const override {
    std::optional<UnixAccount> named = AccountOf(getpwuid(geteuid()));
    return named ? *named : UnixAccount{"", geteuid(), getegid()};
  }
  std::optional<UnixAccount> UserNamed(const std::string& name) const override {
    return AccountOf(getpwnam(name.c_str()));
  }
  std::optional<UnixAccount> UserWithUid(uid_t uid) const override { return AccountOf(getpwuid(uid)); }
  std::vector<gid_t> GroupsOf(const UnixAccount& account) const override {
    int count = 64;
    std::vector<gid_t> groups(static_cast<size_t>(count));
    if (getgrouplist(account.name.c_str(), account.gid, groups.data(), &count) < 0) {
      groups.resize(static_cast<size_t>(count));
      getgrouplist(account.name.c_str(), account.gid, groups.data(), &count);
    }
    groups.resize(static_cast<size_t>(std::max(count, 0)));
    return groups;
  }

  void MakeDir(const std::string& path, mode_t mode) override {
    std::error_code ec;
    fs::create_directories(path, ec);
    ::chmod(path.c_str(), mode);
  }
  bool GiveTo(const std::string& path, uid_t uid, gid_t gid) override { return chown(path.c_str(), uid, gid) == 0; }
  bool IsDirectory(const std::string& path) const override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }
  bool Exists(const std::string& path) const override {
    std::error_code ec;
    return fs::exists(path, ec);
  }
  void Remove(const std::string& path) override {
    std::error_code ec;
    fs::remove(path, ec);
  }
  std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) const override {
    return ReadFileNoThrow(path, max_bytes);
  }
  Status WriteRunRecord(const std::string& path, const RunRecord& record) override {
    return gantry::WriteRunRecord(path, record);
  }
  std::vector<std::pair<std::string, RunRecord>> RunRecords(const std::string& state_dir) const override {
    std::vector<std::pair<std::string, RunRecord>> out;
    std::error_code ec;
    fs::path jobs = fs::path(state_dir) / "jobs";
    if (!fs::exists(jobs, ec)) return out;
    for (const auto& dir : fs::directory_iterator(jobs, ec)) {
      for (const auto& file : fs::directory_iterator(dir.path(), ec)) {
        std::string name = file.path().filename().string();
        if (name.rfind("run-", 0) != 0 || file.path().extension() != ".json") continue;
        if (auto rec = ReadRunRecord(file.path().string())) out.emplace_back(file.path().string(), *rec);
      }
    }
    return out;
  }
  void CapJobLogs(const std::string& job_dir, int64_t cap_bytes) override { gantry::CapJobLogs(job_dir, cap_bytes); }
  std::string LastLogLine(const std::string& path) const override {
    int64_t size = LogLogicalSize(path), next = 0;
    std::string tail = ReadLog(path, std::max<int64_t>(0, size - 4096), 4096, &next);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    size_t nl = tail.rfind('\n');
    return nl == std::string::npos ? tail : tail.substr(nl + 1);
  }
  std::string PortToken(const std::string& state_dir, const std::string& job_id, int run) override {
    return gantry::PortToken(state_dir, job_id, run);
  }

  bool TcpPortFree(int port) const override { return gantry::TcpPortFree(port); }
  int SessionOfPid(int pid) const override {
    // The process may exit while it is read: then it is in no session.
    std::string stat = ReadFileNoThrow("/proc/" + std::to_string(pid) + "/stat").value_or("");
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) return -1;
    std::istringstream rest(stat.substr(close + 2));
    std::string state, ppid, pgrp, session;
    rest >> state >> ppid >> pgrp >> session;
    return session.empty() ? -1 : std::atoi(session.c_str());
  }

  bool HasCgroups() const override { return cgroups_ != nullptr; }
  Expected<std::string> CreateCgroup(const std::string& name, int cpus, int64_t memory_mib) override {
    if (!cgroups_) return Status::Precondition("cgroups", "this agent puts no job in a cgroup of its own");
    return cgroups_->Create(name, cpus, memory_mib);
  }
  std::string CgroupProcs(const std::string& name) const override {
    return cgroups_ ? cgroups_->Dir(name) + "/cgroup.procs" : "";
  }
  int CgroupOomKills(const std::string& name) const override { return cgroups_ ? cgroups_->OomKills(name) : 0; }
  void RemoveCgroup(const std::string& name) override {
    if (cgroups_) cgroups_->Remove(name);
  }

  Status StartMpsDaemon(const std::string& uuid, const std::string& pipe_dir, const std::string& log_dir) override {
    for (const std::string& dir : {pipe_dir, log_dir}) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) return Status::Internal(fmt::format("cannot create the MPS directory {}: {}", dir, ec.message()));
    }
    int rc = MpsControl(uuid, pipe_dir, log_dir, "-d", "");
    if (rc != 0) {
      return Status::Internal(
          fmt::format("starting the MPS control daemon for {} ({} -d) failed with status {}", uuid, mps_control_, rc));
    }
    return Status::Ok();
  }
  void QuitMpsDaemon(const std::string& uuid, const std::string& pipe_dir, const std::string& log_dir) override {
    MpsControl(uuid, pipe_dir, log_dir, "", "quit\n");
  }

  Expected<ContainerLaunch> PrepareContainer(const ContainerJob& job) override {
    return gantry::PrepareContainer(containers_, job);
  }
  void RemoveContainer(const std::string& name) override { gantry::RemoveContainer(containers_, name); }
  void ReleaseStagedMounts(const std::string& dir) override { gantry::ReleaseStagedMounts(dir); }
  std::string ContainerIdOfPid(int pid) const override { return gantry::ContainerIdOfPid(pid); }
  std::vector<std::string> ContainerExec() const override {
    std::vector<std::string> argv{containers_.command};
    argv.insert(argv.end(), containers_.global_options.begin(), containers_.global_options.end());
    argv.push_back("exec");
    return argv;
  }

 private:
  // Runs the control program for one GPU's daemon with `args`, feeding it `input`; its exit
  // status. `mps_control_` is a command line from the agent's configuration.
  int MpsControl(const std::string& uuid, const std::string& pipe_dir, const std::string& log_dir,
                 const std::string& args, const std::string& input) {
    std::string cmd = fmt::format("CUDA_VISIBLE_DEVICES={} CUDA_MPS_PIPE_DIRECTORY={} CUDA_MPS_LOG_DIRECTORY={} {} {}",
                                  ShellQuote(uuid), ShellQuote(pipe_dir), ShellQuote(log_dir), mps_control_, args);
    FILE* p = popen(cmd.c_str(), "w");
    if (!p) return -1;
    if (!input.empty()) std::fwrite(input.data(), 1, input.size(), p);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  JobCgroups* cgroups_;
  std::string mps_control_;
  ContainerRuntime containers_;
};

}  // namespace

std::unique_ptr<NodeEnv> MakeHostNodeEnv(JobCgroups* cgroups, std::string mps_control, ContainerRuntime containers) {
  return std::make_unique<HostNodeEnv>(cgroups, std::move(mps_control), std::move(containers));
}

}  // namespace gantry
