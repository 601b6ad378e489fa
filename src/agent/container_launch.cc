// Container command lines, CDI checks and container clean-up.
#include "agent/container_launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "agent/mount_check.h"
#include "core/read_file.h"
#include "core/shell_quote.h"

extern char** environ;

namespace gantry {

namespace fs = std::filesystem;

namespace {

// Whether a CDI spec in `dirs` names `device` (nvidia-ctk names each GPU by index and by
// UUID, each MIG device by its UUID too).
bool CdiNames(const std::vector<std::string>& dirs, const std::string& device) {
  std::error_code ec;
  for (const std::string& dir : dirs) {
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      std::string ext = f.path().extension().string();
      if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
      std::string text = ReadFileNoThrow(f.path().string(), 16 << 20).value_or("");
      if (text.find(device) != std::string::npos) return true;
    }
  }
  return false;
}

// "soft:hard" of one of this process's limits, so the job gets the limits a bare job gets
// (runc refuses to raise them past the agent's own).
std::string LimitOf(int resource) {
  rlimit l{};
  getrlimit(resource, &l);
  auto show = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("-1") : std::to_string(v); };
  return show(l.rlim_cur) + ":" + show(l.rlim_max);
}

Status WriteEnvFile(const std::string& path, const std::map<std::string, std::string>& env) {
  std::string text;
  for (const auto& [k, v] : env) {
    if (v.find('\n') != std::string::npos) {
      return Status::Invalid("env." + k, "a container job's variables are one line each");
    }
    text += k + "=" + v + "\n";
  }
  fs::remove(path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Internal("cannot write " + path);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok ? Status::Ok() : Status::Internal("cannot write " + path);
}

// The first line the runtime prints for `args` (at most 10 s), or empty.
std::string FirstLineOf(const ContainerRuntime& rt, const std::string& args) {
  std::string cmd = "timeout 10 " + ShellQuote(rt.command);
  for (const std::string& o : rt.global_options) cmd += " " + ShellQuote(o);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((cmd + " " + args + " 2>/dev/null").c_str(), "r"), pclose);
  if (!pipe) return "";
  char line[512] = {0};
  if (!fgets(line, sizeof(line), pipe.get())) return "";
  std::string out = line;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::string ContainerName(const std::string& job_id, int run, const std::string& node_id, const std::string& instance) {
  uint32_t hash = 2166136261u;  // FNV-1a: the same in every build, unlike std::hash
  for (unsigned char c : instance) hash = (hash ^ c) * 16777619u;
  return fmt::format("gantry-{}-{}-{}-{:08x}", job_id, run, node_id, hash);
}

std::vector<std::string> ContainerRunPrefix(const ContainerRuntime& rt, const std::vector<std::string>& job_options) {
  std::vector<std::string> a = {rt.command};
  a.insert(a.end(), rt.global_options.begin(), rt.global_options.end());
  a.insert(a.end(), {"run", "--rm", "--network", "host", "--init", "--security-opt", "no-new-privileges", "--ulimit",
                     "nofile=" + LimitOf(RLIMIT_NOFILE), "--ulimit", "nproc=" + LimitOf(RLIMIT_NPROC)});
  a.insert(a.end(), job_options.begin(), job_options.end());
  a.insert(a.end(), rt.run_options.begin(), rt.run_options.end());
  return a;
}

Expected<ContainerLaunch> PrepareContainer(const ContainerRuntime& rt, const ContainerJob& job) {
  const StartOrder& o = *job.order;
  const ContainerSpec& c = o.spec->container;
  ContainerLaunch launch;
  launch.name = ContainerName(o.job_id, o.run, o.node_id, rt.instance);
  launch.env_file = job.run_dir + "/container.env";
  launch.cid_file = job.run_dir + "/container.id";
  std::vector<std::string> devices;
  if (rt.gpu_devices) {
    for (const AssignedGpu& g : o.gpus) {
      const std::string& device = g.mig_uuid.empty() ? g.uuid : g.mig_uuid;
      if (!CdiNames(rt.cdi_dirs, device)) {
        return Status::Precondition(
            "container_image",
            fmt::format("no CDI spec on node {} names GPU {} (looked in {}): run `nvidia-ctk cdi generate "
                        "--output=/etc/cdi/nvidia.yaml` there (docs/USER_GUIDE.md, Containers)",
                        o.node_id, device, fmt::join(rt.cdi_dirs, ", ")));
      }
      devices.push_back("nvidia.com/gpu=" + device);
    }
  }
  std::map<std::string, std::string> env = job.env;
  for (const auto& [k, v] : c.env) env[k] = v;
  if (Status s = WriteEnvFile(launch.env_file, env); !s.ok()) return s;
  std::error_code ec;
  fs::remove(launch.cid_file, ec);
  launch.argv = ContainerRunPrefix(
      rt, {"--name", launch.name, "--cidfile", launch.cid_file, "--pull", ToString(c.pull), "--env-file",
           launch.env_file, "-v", job.checkpoint_dir + ":" + job.checkpoint_dir + ":rw"});
  std::vector<std::string>& a = launch.argv;
  // Each mount's host path is walked without links and checked for the account the job runs
  // as (the agent's own when it names none). An agent run as root (jobs of other accounts)
  // binds what it checked at a staging path of its own, which the runtime mounts; else the
  // runtime gets the path as checked (only the agent's own account could change it).
  MountAccount account{job.uid, job.gid, job.groups, false};
  if (job.as_root) account = {::geteuid(), ::getegid(), {}, ::geteuid() == 0};
  const std::string stage_dir = StagedMountsDir(job.run_dir);
  for (size_t i = 0; i < c.mounts.size(); ++i) {
    std::string field = fmt::format("container_mounts[{}]", i);
    auto m = ParseMount(c.mounts[i], field);
    if (!m) return m.status();
    auto checked = CheckMountSource(m->host, m->read_only, account, field);
    if (!checked) return checked.status();
    std::string source = checked->path();
    if (::geteuid() == 0) {
      auto staged = StageMount(*checked, stage_dir, std::to_string(i), field);
      if (!staged) {
        ReleaseStagedMounts(stage_dir);
        return staged.status();
      }
      source = *staged;
    }
    a.insert(a.end(), {"-v", source + ":" + m->container + (m->read_only ? ":ro" : ":rw")});
  }
  if (!job.as_root) {
    a.insert(a.end(), {"--user", fmt::format("{}:{}", job.uid, job.gid), "--cap-drop", "all"});
    for (gid_t g : job.groups) {
      if (g != job.gid) a.insert(a.end(), {"--group-add", std::to_string(g)});
    }
  }
  if (o.memory_mib > 0) a.insert(a.end(), {"--memory", fmt::format("{}m", o.memory_mib)});
  if (o.cpus > 0) a.insert(a.end(), {"--cpus", std::to_string(o.cpus)});
  if (!job.mps_pipe_dir.empty()) a.insert(a.end(), {"-v", job.mps_pipe_dir + ":" + job.mps_pipe_dir, "--ipc", "host"});
  if (!c.workdir.empty()) a.insert(a.end(), {"--workdir", c.workdir});
  for (const std::string& d : devices) a.insert(a.end(), {"--device", d});
  a.insert(a.end(), {c.image, "/bin/sh", "-c", o.spec->command});
  return launch;
}

bool WaitForContainer(const ContainerRuntime& rt, const std::string& name, int timeout_ms,
                      const std::function<bool()>& give_up) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // The runtime is asked after 0.1 s, 0.2 s, 0.4 s ... at most each second (each asking is
  // a process), and give_up() every 0.1 s between.
  auto next_ask = Clock::now();
  auto interval = std::chrono::milliseconds(100);
  while (!give_up()) {
    if (Clock::now() >= next_ask) {
      if (FirstLineOf(rt, "container inspect --format '{{.State.Running}}' " + ShellQuote(name)) == "true") return true;
      next_ask = Clock::now() + interval;
      interval = std::min(interval * 2, std::chrono::milliseconds(1000));
    }
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void RemoveContainer(const ContainerRuntime& rt, const std::string& name) {
  std::vector<std::string> args = {rt.command};
  args.insert(args.end(), rt.global_options.begin(), rt.global_options.end());
  args.insert(args.end(), {"rm", "--force", "--time", "0", name});
  std::thread([args] {
    std::vector<char*> argv;
    for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    for (int fd : {0, 1, 2}) posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0);
    pid_t pid = 0;
    if (posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) waitpid(pid, nullptr, 0);
    posix_spawn_file_actions_destroy(&actions);
  }).detach();
}

std::string DescribeContainerRuntime(const ContainerRuntime& rt) {
  std::string version = FirstLineOf(rt, "--version");
  if (version.empty()) {
    return fmt::format("containers: '{}' does not run here: container jobs fail on this node (--container-runtime)",
                       rt.command);
  }
  std::string setup = FirstLineOf(rt,
                                  "info --format '{{.Host.OCIRuntime.Name}}, cgroups {{.Host.CgroupsVersion}} "
                                  "({{.Host.CgroupManager}})'");
  return fmt::format("containers: {}{}{}", version, setup.empty() ? "" : " with ", setup);
}

std::string ContainerIdOfPid(int pid) {
  std::string text = ReadFileNoThrow("/proc/" + std::to_string(pid) + "/cgroup").value_or("");
  // ...libpod-<64 hex>... (or a plain /<64 hex> path with cgroupfs)
  for (size_t i = 0; i + 64 <= text.size(); ++i) {
    size_t n = 0;
    while (n < 64 && std::isxdigit(static_cast<unsigned char>(text[i + n])) &&
           !std::isupper(static_cast<unsigned char>(text[i + n])))
      ++n;
    if (n == 64 && (i + 64 == text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 64])))) {
      return text.substr(i, 64);
    }
    i += n;
  }
  return "";
}

}  // namespace gantry
