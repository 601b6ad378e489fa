// Per-job cgroup v2 setup, limits, OOM counts and removal.
#include "agent/cgroups.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/yaml_util.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

// A cgroup or /proc file's text; empty when it cannot be read.
std::string ReadAll(const std::string& path) {
  auto text = ReadTextFile(path);
  return text ? *text : std::string();
}

// One write(2) of `value`, as the cgroup files want; false with errno's text in `why`.
bool WriteValue(const std::string& path, const std::string& value, std::string* why) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  out << value;
  out.flush();
  if (out) return true;
  *why = fmt::format("cannot write '{}' to {}", value, path);
  return false;
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<JobCgroups> JobCgroups::Open(const std::string& mount, const std::string& self_cgroup, std::string* why,
                                             bool only_if_alone) {
  std::string path;
  std::istringstream lines(self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (mount.empty() || path.empty()) {
    *why = "no cgroup v2 (unified) hierarchy";
    return nullptr;
  }
  std::string base = (fs::path(mount) / fs::path(path).relative_path()).lexically_normal().string();
  if (!base.empty() && base.back() == '/') base.pop_back();
  std::string controllers = ReadAll(base + "/cgroup.controllers");
  if (!HasWord(controllers, "cpu") || !HasWord(controllers, "memory")) {
    *why = fmt::format("the cpu and memory controllers do not reach {} (controllers: '{}')", base,
                       controllers.substr(0, controllers.find('\n')));
    return nullptr;
  }
  if (access((base + "/cgroup.subtree_control").c_str(), W_OK) != 0 || access(base.c_str(), W_OK) != 0) {
    *why = "cannot write " + base + " (run the agent as root, or give it a delegated cgroup)";
    return nullptr;
  }
  if (only_if_alone) {
    std::istringstream procs(ReadAll(base + "/cgroup.procs"));
    for (std::string pid; procs >> pid;) {
      if (pid != std::to_string(getpid())) {
        *why = fmt::format(
            "the agent shares {} with other processes (run it as its own systemd service with "
            "Delegate=yes, or pass --job-cgroups required)",
            base);
        return nullptr;
      }
    }
  }
  std::error_code ec;
  fs::create_directories(base + "/agent", ec);
  fs::create_directories(base + "/jobs", ec);
  if (ec) {
    *why = "cannot make cgroups under " + base + ": " + ec.message();
    return nullptr;
  }
  // Every process in the agent's cgroup (the agent, a service's helpers) moves to a leaf.
  std::istringstream procs(ReadAll(base + "/cgroup.procs"));
  for (std::string pid; procs >> pid;) {
    std::string ignored;  // a process that ended meanwhile
    WriteValue(base + "/agent/cgroup.procs", pid, &ignored);
  }
  if (HasWord(ReadAll(base + "/cgroup.procs"), std::to_string(getpid()))) {
    *why = "could not move the agent out of " + base;
    return nullptr;
  }
  for (const std::string& dir : {base, base + "/jobs"}) {
    if (!WriteValue(dir + "/cgroup.subtree_control", "+cpu +memory", why)) return nullptr;
  }
  auto cg = std::unique_ptr<JobCgroups>(new JobCgroups());
  cg->jobs_ = base + "/jobs";
  return cg;
}

std::unique_ptr<JobCgroups> JobCgroups::OpenHere(std::string* why, bool only_if_alone) {
  std::string mount;
  std::istringstream mounts(ReadAll("/proc/self/mounts"));
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream f(line);
    std::string device, point, type;
    f >> device >> point >> type;
    if (type == "cgroup2") mount = point;
  }
  return Open(mount, ReadAll("/proc/self/cgroup"), why, only_if_alone);
}

std::unique_ptr<JobCgroups> JobCgroups::ForMode(const std::string& mode, std::string* note, std::string* error) {
  if (mode == "off") {
    *note = "job cgroups off: host memory is watched from /proc";
    return nullptr;
  }
  if (mode != "auto" && mode != "required") {
    *error = "--job-cgroups: expected auto, required or off";
    return nullptr;
  }
  std::string why = "the agent is not root";
  std::unique_ptr<JobCgroups> cg = geteuid() == 0 || mode == "required" ? OpenHere(&why, mode == "auto") : nullptr;
  if (cg) {
    *note = "jobs run in their own cgroups under " + cg->jobs_;
  } else if (mode == "required") {
    *error = "--job-cgroups required: " + why;
  } else {
    *note = "no job cgroups (" + why + "): host memory is watched from /proc";
  }
  return cg;
}

Expected<std::string> JobCgroups::Create(const std::string& name, int cpus, int64_t memory_mib) {
  std::string dir = Dir(name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot make cgroup " + dir + ": " + ec.message());
  std::string why;
  constexpr int64_t kPeriodUs = 100000;
  std::string cpu_max = cpus > 0 ? fmt::format("{} {}", cpus * kPeriodUs, kPeriodUs) : "max";
  std::string memory_max = memory_mib > 0 ? std::to_string(memory_mib * 1024 * 1024) : "max";
  if (!WriteValue(dir + "/cpu.max", cpu_max, &why) || !WriteValue(dir + "/memory.max", memory_max, &why)) {
    return Status::Internal(why);
  }
  if (memory_mib > 0) WriteValue(dir + "/memory.swap.max", "0", &why);  // a limit swap cannot dodge
  return dir + "/cgroup.procs";
}

int JobCgroups::OomKills(const std::string& name) const {
  std::istringstream in(ReadAll(Dir(name) + "/memory.events"));
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return static_cast<int>(value);
  }
  return 0;
}

void JobCgroups::Remove(const std::string& name) {
  std::string dir = Dir(name);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  std::string why;
  if (fs::exists(dir + "/cgroup.kill", ec)) {
    WriteValue(dir + "/cgroup.kill", "1", &why);
  } else {
    // Older kernels: kill each member, checking it is still one (not a recycled pid).
    std::istringstream procs(ReadAll(dir + "/cgroup.procs"));
    for (pid_t pid; procs >> pid;) {
      if (ReadAll(fmt::format("/proc/{}/cgroup", pid)).find("/jobs/" + name + "\n") != std::string::npos) {
        kill(pid, SIGKILL);
      }
    }
  }
  // A cgroup is removed with rmdir once empty (its control files go with it).
  for (int i = 0; i < 50 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace gantry
