// The node's runs: orders in, processes out, exits reported (what the machine does, through
// the NodeEnv and the JobLauncher).
#include "agent/node_runs.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "agent/container_launch.h"
#include "core/job_logs.h"
#include "protocol/order_wire.h"

namespace gantry {

NodeRuns::NodeRuns(NodeRunsOptions options, NodeReports& reports, NodeEnv& env, JobLauncher& launcher,
                   const Clock& clock, std::function<void(const std::string&)> on_run_ended)
    : options_(std::move(options)),
      reports_(reports),
      env_(env),
      launcher_(launcher),
      clock_(clock),
      on_run_ended_(std::move(on_run_ended)) {
  if (options_.mps_daemons) mps_ = std::make_unique<MpsDaemons>(env_, options_.state_dir + "/mps");
}

std::map<std::string, std::string> NodeRuns::JobEnvironment(const StartOrder& o, const std::string& checkpoint_dir) {
  std::map<std::string, std::string> env = o.spec->env;
  std::string devices;
  for (const AssignedGpu& g : o.gpus) {
    if (!devices.empty()) devices += ",";
    devices += !g.mig_uuid.empty() ? g.mig_uuid : g.uuid;
  }
  env["CUDA_VISIBLE_DEVICES"] = devices;
  env["NVIDIA_VISIBLE_DEVICES"] = devices;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["GANTRY_JOB_ID"] = o.job_id;
  env["GANTRY_JOB_NAME"] = o.spec->name;
  env["GANTRY_USER"] = o.spec->user;
  env["GANTRY_TEAM"] = o.spec->team;
  env["GANTRY_RESTART_COUNT"] = std::to_string(o.run - 1);
  env["GANTRY_CHECKPOINT_DIR"] = checkpoint_dir;
  env["GANTRY_CHECKPOINT_DONE"] = checkpoint_dir + "/checkpoint-done";
  env["GANTRY_NODE_RANK"] = std::to_string(o.node_rank);
  env["GANTRY_NUM_NODES"] = std::to_string(o.num_nodes);
  env["GANTRY_MASTER_NODE"] = o.leader_node;
  // What torchrun and torch.distributed's env:// read: one launcher per node, so a gang's
  // world is its nodes (torchrun sets its own workers' RANK and WORLD_SIZE over these).
  env["MASTER_ADDR"] = o.master_addr.empty() ? o.leader_node : o.master_addr;
  if (o.master_port > 0) env["MASTER_PORT"] = std::to_string(o.master_port);
  env["WORLD_SIZE"] = env["GANTRY_NUM_NODES"];
  env["NODE_RANK"] = env["RANK"] = env["GANTRY_NODE_RANK"];
  env["NPROC_PER_NODE"] = env["LOCAL_WORLD_SIZE"] = std::to_string(std::max<size_t>(o.gpus.size(), 1));
  if (!o.node_address.empty()) env["GANTRY_NODE_ADDRESS"] = o.node_address;
  for (const auto& [name, port] : o.ports) {
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    env["GANTRY_PORT_" + upper] = std::to_string(port);
    // Its path through the server's port proxy (a web app's base URL: Jupyter's
    // --ServerApp.base_url, TensorBoard's --path_prefix).
    env["GANTRY_PORT_" + upper + "_PREFIX"] = fmt::format("/jobs/{}/ports/{}", o.job_id, name);
  }
  env["GANTRY_SHARING"] = ToString(o.sharing);
  if ((o.sharing == SharingMode::kTimeSlice || o.sharing == SharingMode::kMps) && !o.gpus.empty()) {
    env["GANTRY_GPU_FRACTION"] = fmt::format("{:g}", o.gpus[0].milli / 1000.0);
    if (o.gpus[0].memory_mib > 0) env["GANTRY_GPU_MEMORY_LIMIT_MIB"] = std::to_string(o.gpus[0].memory_mib);
  }
  if (o.sharing == SharingMode::kMps && !o.gpus.empty()) {
    const AssignedGpu& g = o.gpus[0];
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(g.mps_thread_percent);
    if (g.memory_mib > 0) env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = fmt::format("0={}M", g.memory_mib);
  }
  return env;
}

namespace {

// The uids no person's own account has: below the floor, the overflow uid `nobody` (65534,
// what NFS squashes to), systemd's dynamic service users (61184..65519), and the two
// highest (-1 and -2 as 32 bits).
bool IsSystemUid(uid_t uid, uid_t floor) {
  return uid < floor || uid == 65534 || (uid >= 61184 && uid <= 65519) || uid >= 4294967294u;
}

}  // namespace

Expected<UnixAccount> NodeRuns::JobAccount(const StartOrder& o) const {
  if (!env_.Privileged()) {  // an unprivileged agent runs everything as itself
    UnixAccount self = env_.Self();
    return UnixAccount{"", self.uid, self.gid};
  }
  const JobSpec& spec = *o.spec;
  std::optional<UnixAccount> pw;
  if (options_.run_as == RunAs::kAgent) {
    pw = env_.UserWithUid(0).value_or(UnixAccount{"root", 0, 0});
  } else {
    pw = env_.UserNamed(spec.user);
    if (pw && pw->uid != 0 && IsSystemUid(pw->uid, options_.min_job_uid)) {
      return Status::Denied(
          "user", fmt::format("refused to run as '{}': on node {} that is a system account (uid {}: below the "
                              "agent's --min-job-uid {}, nobody, or systemd's dynamic users)",
                              spec.user, o.node_id, pw->uid, options_.min_job_uid));
    }
    if (!pw && !o.unix_account.empty()) {
      pw = env_.UserNamed(o.unix_account);
      if (!pw) {
        return Status::Precondition("unix_account", fmt::format("no Unix user '{}' (team {}'s unix_account) on node {}",
                                                                o.unix_account, spec.team, o.node_id));
      }
    }
    if (!pw) {
      return Status::Precondition(
          "user", fmt::format("no Unix user '{}' on node {}, and team {} names no unix_account for such users "
                              "(users.yaml teams.{}.unix_account)",
                              spec.user, o.node_id, spec.team, spec.team));
    }
  }
  if (pw->uid == 0) {
    if (!o.allow_root) {
      return Status::Denied(
          "user", fmt::format("refused to run as root: team {} may not (users.yaml teams.{}.allow_root)", spec.team,
                              spec.team));
    }
    return UnixAccount{};  // root, as the agent itself
  }
  return *pw;
}

Status NodeRuns::CheckPortsFree(const StartOrder& o) const {
  std::vector<std::pair<std::string, int>> mine(o.ports.begin(), o.ports.end());
  if (o.node_rank == 0 && o.master_port != 0) mine.emplace_back("MASTER_PORT", o.master_port);
  for (const auto& [name, port] : mine) {
    if (port <= 0) {
      return Status::Precondition(
          "ports", fmt::format("node {} has no free port left for {} (its --ports range)", o.node_id, name));
    }
    if (!env_.TcpPortFree(port)) {
      return Status::Precondition(
          "ports", fmt::format("port {} ({}) on node {} is taken by a process Gantry did not start; keep the "
                               "node's --ports range for Gantry's jobs",
                               port, name, o.node_id));
    }
  }
  return Status::Ok();
}

bool ParseRunAs(const std::string& text, RunAs* out) {
  if (text == "auto")
    *out = RunAs::kAuto;
  else if (text == "user")
    *out = RunAs::kUser;
  else if (text == "agent")
    *out = RunAs::kAgent;
  else
    return false;
  return true;
}

std::vector<RunReport> NodeRuns::Recover() {
  std::vector<RunReport> out;
  for (const auto& [path, record] : env_.RunRecords(options_.state_dir)) out.push_back(RecoverRun(record, path));
  return out;
}

RunReport NodeRuns::RecoverRun(const RunRecord& rec, const std::string& record_file) {
  RunReport report{rec.job_id, rec.run, rec.node_id, false, -1, "", -1};
  // What a job wrote while no agent watched it is held to the cap too.
  env_.CapJobLogs(JobDir(rec.job_id), options_.max_log_bytes);
  int code = rec.pid > 0 ? launcher_.ExitStatus(rec.exit_file) : -1;
  if (rec.ended) {
    report.exited = true;
    report.exit_code = rec.exit_code;
    report.reason = rec.reason;
    report.ended_ms = rec.ended_ms;
  } else if (code >= 0) {
    report.exited = true;
    report.exit_code = code;
    report.ended_ms = launcher_.ExitTime(rec.exit_file);  // ended while no agent watched: the exit file says when
  } else if (rec.pid > 0 && !launcher_.IsRunning(rec.pid)) {
    report.exited = true;
    report.exit_code = 137;
    report.reason = "the job's process ended while no agent watched it";
  } else {
    ActiveRun r;
    static_cast<RunRecord&>(r) = rec;
    r.record_file = record_file;
    // What the record does not keep is derived again: the checkpoint file that ends a
    // grace period, the GPUs the run holds, where a runtime writes why it failed.
    if (r.pid > 0) r.checkpoint_done = JobDir(r.job_id) + "/checkpoint/checkpoint-done";
    if (auto order = StartOrderFromJson(nlohmann::json::parse(r.start_order, nullptr, false)); order) {
      r.gpus = order->gpus;
      r.stderr_log = RunLogPath(JobDir(r.job_id), r.run, order->node_rank, "stderr");
    }
    std::string key = Key(r.job_id, r.run, r.node_id);
    runs_[key] = r;  // adopted: still running
    AddLoad(key, r);
    if (mps_) {
      for (const std::string& uuid : rec.mps_gpus) mps_->Adopt(key, uuid);
    }
    std::lock_guard<std::mutex> lock(published_mu_);
    sessions_[r.pid] = r.job_id;
  }
  return report;
}

std::vector<MigDeviceInfo> NodeRuns::MigDevicesNow(int gpu) const {
  if (!options_.gpus) return {};
  auto inv = options_.gpus->Inventory();
  if (!inv) return {};
  for (const GpuInfo& g : inv->gpus) {
    if (g.index == gpu) return g.mig_devices;
  }
  return {};
}

void NodeRuns::FailStart(const StartOrder& o, int code, const std::string& reason) {
  RunReport exited{o.job_id, o.run, o.node_id, true, code, reason, Now()};
  reports_.RunExited(exited);
}

bool NodeRuns::PrepareMig(StartOrder& o) {
  GpuProvider* provider = options_.gpus;
  auto fail = [&](int gpu, const std::string& why) {
    std::string reason = fmt::format("MIG re-partition of GPU {} on {} failed: {}", gpu, o.node_id, why);
    reports_.MigChanged({o.node_id, gpu, MigDevicesNow(gpu), o.job_id, reason});
    FailStart(o, 125, reason);
    return false;
  };
  std::map<int, std::vector<MigDeviceInfo>> layouts;  // GPU index -> its MIG devices after the changes
  for (const MigOrder& m : o.mig) {
    if (!provider) return fail(m.gpu, "this agent has no GPU provider that can change MIG instances");
    auto devices = provider->ApplyMig(m.gpu_uuid, m.destroy, m.create);
    if (!devices) return fail(m.gpu, devices.status().message());
    layouts[m.gpu] = *devices;
    reports_.MigChanged({o.node_id, m.gpu, *devices, o.job_id, ""});
  }
  for (AssignedGpu& g : o.gpus) {
    if (g.mig_profile.empty() || !g.mig_uuid.empty() || !provider) continue;
    if (!layouts.count(g.index)) layouts[g.index] = MigDevicesNow(g.index);
    for (const MigDeviceInfo& d : layouts[g.index]) {
      if (d.profile == g.mig_profile && d.start == g.mig_start) g.mig_uuid = d.uuid;
    }
    if (g.mig_uuid.empty()) {
      return fail(g.index, fmt::format("no {} instance at slice {}", g.mig_profile, g.mig_start));
    }
  }
  return true;
}

void NodeRuns::Start(StartOrder o) {
  std::string key = Key(o.job_id, o.run, o.node_id);
  if (runs_.count(key)) return;  // resent after a controller restart: already running
  if (!PrepareMig(o)) return;
  ActiveRun r;
  r.job_id = o.job_id;
  r.run = o.run;
  r.node_id = o.node_id;
  r.gpus = o.gpus;
  r.start_order = StartOrderToJson(o).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (o.spec->command.empty()) {
    // Holds its GPUs for hold_gpus (else its estimated duration, else until stopped), then
    // ends with exit 0. No process and no files: after a restart the controller resends
    // the order and the hold starts over.
    DurationMs hold = o.spec->hold_gpus_ms > 0 ? o.spec->hold_gpus_ms : o.spec->estimated_duration_ms;
    if (hold > 0) r.ends_at_ms = Now() + hold;
  } else {
    if (Status ports = CheckPortsFree(o); !ports.ok()) return FailStart(o, 125, ports.message());
    auto account = JobAccount(o);
    if (!account) return FailStart(o, 126, account.status().message());
    if (!PrepareJobDirs(o, *account)) return;
    std::map<std::string, std::string> mps_env;
    if (!AcquireMps(o, &mps_env, &r.mps_gpus)) return;
    r.mps_env = mps_env;
    if (!Launch(o, *account, mps_env, r)) {
      if (mps_) mps_->Release(key);
      return;
    }
    // Without its record a restarted agent cannot adopt the run; it still runs now.
    if (Status s = env_.WriteRunRecord(r.record_file, r); !s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  }
  runs_[key] = r;
  AddLoad(key, r);
  reports_.RunStarted({o.job_id, o.run, o.node_id, false, -1, "", -1});
}

bool NodeRuns::PrepareJobDirs(const StartOrder& o, const UnixAccount& account) {
  Status made = MakeJobDirs(o, account);
  if (!made.ok()) FailStart(o, made.code() == StatusCode::kPermissionDenied ? 126 : 127, made.message());
  return made.ok();
}

Status NodeRuns::MakeJobDirs(const StartOrder& o, const UnixAccount& account) {
  // The job's directory is the agent's (logs, run records, exit files: nothing the job can
  // replace with a link); its working and checkpoint directories are the job user's, 0700.
  std::string dir = JobDir(o.job_id);
  std::string checkpoint = dir + "/checkpoint";
  std::string work = dir + "/work";
  for (const std::string& d : {options_.state_dir + "/jobs", dir, work, checkpoint}) {
    env_.MakeDir(d, d == work || d == checkpoint ? 0700 : 0711);
  }
  for (const std::string& d : {work, checkpoint}) {
    if (!account.name.empty() && !env_.GiveTo(d, account.uid, account.gid)) {
      return Status::Denied("unix_account", fmt::format("cannot give {} to {}", d, account.name));
    }
  }
  // A working directory that is not there fails the start with that reason (the process
  // would only say so on its stderr).
  if (!o.spec->working_dir.empty() && !env_.IsDirectory(o.spec->working_dir)) {
    return Status::NotFound(fmt::format("working_dir: no directory {} on node {}", o.spec->working_dir, o.node_id));
  }
  return Status::Ok();
}

bool NodeRuns::AcquireMps(const StartOrder& o, std::map<std::string, std::string>* env,
                          std::vector<std::string>* gpus) {
  if (o.sharing != SharingMode::kMps || !mps_) return true;
  std::string key = Key(o.job_id, o.run, o.node_id);
  for (const AssignedGpu& g : o.gpus) {
    auto pipe = mps_->Acquire(key, g.uuid);
    if (!pipe) {
      mps_->Release(key);
      FailStart(o, 127, pipe.status().message());
      return false;
    }
    gpus->push_back(g.uuid);
    (*env)["CUDA_MPS_PIPE_DIRECTORY"] = *pipe;
    (*env)["CUDA_MPS_LOG_DIRECTORY"] = mps_->LogDir(g.uuid);
  }
  return true;
}

bool NodeRuns::Launch(const StartOrder& o, const UnixAccount& account,
                      const std::map<std::string, std::string>& mps_env, ActiveRun& r) {
  std::string dir = JobDir(o.job_id);
  std::string checkpoint = dir + "/checkpoint";
  r.record_file = fmt::format("{}/run-{}-{}.json", dir, o.run, o.node_id);
  r.exit_file = fmt::format("{}/run-{}-{}.exit", dir, o.run, o.node_id);
  r.checkpoint_done = checkpoint + "/checkpoint-done";
  r.memory_limit_mib = o.memory_mib;
  env_.Remove(r.checkpoint_done);
  env_.Remove(r.exit_file);
  SpawnRequest req;
  if (env_.HasCgroups()) {
    std::string name = fmt::format("{}-{}-{}", o.job_id, o.run, o.node_id);
    auto procs = env_.CreateCgroup(name, o.cpus, o.memory_mib);
    if (!procs) {
      FailStart(o, 127, procs.status().message());
      return false;
    }
    r.cgroup = name;
    req.cgroup_procs = *procs;
  }
  req.user = account.name;
  req.shim = options_.shim;
  req.command = o.spec->command;
  req.working_dir = dir + "/work";
  req.job_working_dir = o.spec->working_dir;  // entered with the job's rights (process.h)
  req.env = JobEnvironment(o, checkpoint);
  if (!o.ports.empty()) req.env["GANTRY_PORT_TOKEN"] = env_.PortToken(options_.state_dir, o.job_id, o.run);
  req.env.insert(mps_env.begin(), mps_env.end());
  // Each run and rank writes its own logs (agent-owned; the job writes through the
  // descriptors it inherits), so a restart or another rank never mixes into them.
  env_.MakeDir(RunLogDir(dir, o.run), 0700);
  req.stdout_path = RunLogPath(dir, o.run, o.node_rank, "stdout");
  req.stderr_path = RunLogPath(dir, o.run, o.node_rank, "stderr");
  req.exit_file = r.exit_file;
  r.stderr_log = req.stderr_path;
  if (o.spec->container.enabled() && !PrepareContainerRun(o, account, req, r)) {
    if (!r.cgroup.empty()) env_.RemoveCgroup(r.cgroup);
    return false;
  }
  auto pid = launcher_.Spawn(req);
  if (!pid) {
    if (!r.cgroup.empty()) env_.RemoveCgroup(r.cgroup);
    if (!r.container.empty()) env_.ReleaseStagedMounts(StagedMountsDir(RunLogDir(dir, o.run)));
    FailStart(o, 127, pid.status().message());
    return false;
  }
  r.pid = *pid;
  r.child = true;
  std::lock_guard<std::mutex> lock(published_mu_);
  sessions_[r.pid] = o.job_id;
  return true;
}

bool NodeRuns::PrepareContainerRun(const StartOrder& o, const UnixAccount& account, SpawnRequest& req, ActiveRun& r) {
  std::string dir = JobDir(o.job_id);
  ContainerJob job{
      &o, req.env, RunLogDir(dir, o.run), dir + "/checkpoint", account.uid, account.gid, {}, account.name.empty(), ""};
  // Its groups on the node reach the mounts as they would a bare job's.
  if (!account.name.empty()) job.groups = env_.GroupsOf(account);
  if (auto pipe = req.env.find("CUDA_MPS_PIPE_DIRECTORY"); pipe != req.env.end()) job.mps_pipe_dir = pipe->second;
  auto launch = env_.PrepareContainer(job);
  if (!launch) {
    FailStart(o, 125, launch.status().message());
    return false;
  }
  // The runtime runs as the agent, with the agent's environment; the job's variables are in
  // its env file, and its account applies inside the container.
  req.argv = launch->argv;
  req.user.clear();
  req.env.clear();
  req.working_dir = dir;
  r.container = launch->name;
  r.container_id_file = launch->cid_file;
  return true;
}

void NodeRuns::LearnContainerIds() {
  for (auto& [key, r] : runs_) {
    if (r.container.empty() || r.container_id_file.empty()) continue;
    std::string id = env_.ReadSmallFile(r.container_id_file, 128).value_or("");
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
    if (id.empty()) continue;
    std::lock_guard<std::mutex> lock(published_mu_);
    containers_[id] = r.job_id;
    r.container_id_file.clear();  // learnt
  }
}

void NodeRuns::Stop(const StopOrder& o) {
  std::string key = Key(o.job_id, o.run, o.node_id);
  auto it = runs_.find(key);
  if (it == runs_.end()) {
    reports_.RunExited({o.job_id, o.run, o.node_id, true, 143, "not running on this node", Now()});
    return;
  }
  ActiveRun& r = it->second;
  if (r.stop_reason.empty()) r.stop_reason = o.reason;  // a later "checkpoint saved" keeps the first reason
  if (r.pid == 0) {
    Exited(key, 143, o.reason);
    return;
  }
  launcher_.Signal(r.pid, o.grace_ms > 0 ? SIGTERM : SIGKILL);
  if (o.grace_ms > 0) r.kill_at_ms = Now() + o.grace_ms;
}

void NodeRuns::CheckHostMemory() {
  int64_t now = Now();
  if (now - memory_checked_ms_ < 1000) return;
  memory_checked_ms_ = now;
  for (auto& [key, r] : runs_) {
    if (r.pid <= 0 || r.memory_limit_mib <= 0 || !r.cgroup.empty() || r.stop_reason.rfind("used ", 0) == 0) {
      continue;  // the kernel enforces a cgroup's limit
    }
    int64_t rss = launcher_.MemoryMib(r.pid);
    if (rss <= r.memory_limit_mib) continue;
    r.stop_reason =
        fmt::format("used {} MiB of host memory, over the {} MiB it asked for (memory_gb)", rss, r.memory_limit_mib);
    launcher_.Signal(r.pid, SIGKILL);
  }
}

void NodeRuns::TrimLogs() {
  int64_t now = Now();
  if (now - logs_trimmed_ms_ < 1000) return;
  logs_trimmed_ms_ = now;
  std::string last;
  for (const auto& [key, r] : runs_) {  // by job id first: each job's logs once
    if (r.pid <= 0 || r.job_id == last) continue;
    last = r.job_id;
    env_.CapJobLogs(JobDir(r.job_id), options_.max_log_bytes);
  }
}

void NodeRuns::Tick() {
  CheckHostMemory();
  LearnContainerIds();
  TrimLogs();
  int64_t now = Now();
  std::vector<std::pair<std::string, int>> ended;
  for (auto& [key, r] : runs_) {
    if (r.pid == 0) {
      if (r.ends_at_ms >= 0 && now >= r.ends_at_ms) ended.emplace_back(key, r.hold_exit);
      continue;
    }
    // Stopping: SIGKILL at the deadline, or as soon as the job says its checkpoint is saved.
    bool saved = r.kill_at_ms >= 0 && !r.checkpoint_done.empty() && env_.Exists(r.checkpoint_done);
    if (r.kill_at_ms >= 0 && (now >= r.kill_at_ms || saved)) {
      launcher_.Signal(r.pid, SIGKILL);
      if (!r.container.empty()) env_.RemoveContainer(r.container);  // not in the group
      r.kill_at_ms = -1;
      if (saved) env_.Remove(r.checkpoint_done);
    }
    int code = launcher_.Poll(r.pid, r.child, r.exit_file);
    if (code >= 0) ended.emplace_back(key, code);
  }
  for (const auto& [key, code] : ended) Exited(key, code, runs_[key].stop_reason);
}

void NodeRuns::AddLoad(const std::string& key, const ActiveRun& r) {
  {
    std::lock_guard<std::mutex> lock(published_mu_);
    active_[key] = {r.job_id, r.run, r.node_id, false, -1, ""};
  }
  for (const AssignedGpu& g : r.gpus) {
    GpuLoad& l = gpu_loads_[g.uuid];
    l.milli += g.milli;
    int64_t memory = g.memory_mib > 0 ? g.memory_mib : static_cast<int64_t>(g.milli) * 40;  // ~40 GiB a whole GPU
    l.memory += memory;
    if (r.pid > 0) l.processes.emplace_back(r.pid, memory);
    SetGpuLoad(g.uuid);
  }
}

void NodeRuns::RemoveLoad(const std::string& key, const ActiveRun& r) {
  {
    std::lock_guard<std::mutex> lock(published_mu_);
    active_.erase(key);
  }
  for (const AssignedGpu& g : r.gpus) {
    auto it = gpu_loads_.find(g.uuid);
    if (it == gpu_loads_.end()) continue;
    GpuLoad& l = it->second;
    l.milli -= g.milli;
    l.memory -= g.memory_mib > 0 ? g.memory_mib : static_cast<int64_t>(g.milli) * 40;
    auto& procs = l.processes;
    procs.erase(std::remove_if(procs.begin(), procs.end(), [&](const auto& p) { return p.first == r.pid; }),
                procs.end());
    SetGpuLoad(g.uuid);
    if (l.milli <= 0 && procs.empty()) gpu_loads_.erase(it);
  }
}

void NodeRuns::SetGpuLoad(const std::string& uuid) {
  if (!options_.load_sink) return;
  const GpuLoad& l = gpu_loads_[uuid];
  double share = std::min(1.0, static_cast<double>(std::max<int64_t>(0, l.milli)) / 1000.0);
  options_.load_sink->SetLoad(uuid, share, std::max<int64_t>(0, l.memory), l.processes);
}

std::vector<RunReport> NodeRuns::ActiveRuns() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  std::vector<RunReport> out;
  for (const auto& [key, r] : active_) out.push_back(r);
  return out;
}

std::string NodeRuns::JobOfPid(int pid) const {
  std::lock_guard<std::mutex> lock(published_mu_);
  auto it = sessions_.find(pid);
  if (it != sessions_.end()) return it->second;
  it = sessions_.find(env_.SessionOfPid(pid));
  if (it != sessions_.end()) return it->second;
  // A process in a container is not in its runtime's session: its cgroup names the container.
  std::string container = containers_.empty() ? "" : env_.ContainerIdOfPid(pid);
  auto in = containers_.find(container);
  return in == containers_.end() ? "" : in->second;
}

void NodeRuns::Exited(const std::string& key, int code, std::string reason) {
  ActiveRun r = runs_[key];
  runs_.erase(key);
  if (on_run_ended_) on_run_ended_(key);  // its sessions hang up: nothing of it runs on after it
  if (mps_) mps_->Release(key);
  RemoveLoad(key, r);
  if (r.pid == 0) {  // it held GPUs: what its sessions started ends with its cgroup
    if (!r.cgroup.empty()) env_.RemoveCgroup(r.cgroup);
    reports_.RunExited({r.job_id, r.run, r.node_id, true, code, reason, Now()});
    return;
  }
  {
    std::lock_guard<std::mutex> lock(published_mu_);
    sessions_.erase(r.pid);
  }
  launcher_.Signal(r.pid, SIGKILL);  // leftovers of the group
  if (!r.container.empty()) {
    env_.RemoveContainer(r.container);  // a runtime killed before it could remove it
    env_.ReleaseStagedMounts(StagedMountsDir(RunLogDir(JobDir(r.job_id), r.run)));
    env_.Remove(RunLogDir(JobDir(r.job_id), r.run) + "/container.env");  // the job's variables, secrets too
    std::lock_guard<std::mutex> lock(published_mu_);
    for (auto it = containers_.begin(); it != containers_.end();) {
      it = it->second == r.job_id ? containers_.erase(it) : std::next(it);
    }
    // 125-127 with the runtime's "Error: ...": it failed itself (no such image, a refused
    // option, a command not in the image); its last word says why.
    std::string last = code >= 125 && code <= 127 && reason.empty() ? env_.LastLogLine(r.stderr_log) : "";
    if (last.rfind("Error: ", 0) == 0) reason = "container runtime: " + last.substr(7);
  }
  if (!r.cgroup.empty()) {
    if (code != 0 && reason.empty() && env_.CgroupOomKills(r.cgroup) > 0) {
      reason = fmt::format("killed by the kernel: over its memory limit of {} MiB (memory_gb)", r.memory_limit_mib);
    }
    env_.RemoveCgroup(r.cgroup);  // and whatever left the process group
  }
  // The shim writes the exit file as the job ends: its time is the job's end.
  TimeMs ended = launcher_.ExitTime(r.exit_file);
  if (ended < 0) ended = Now();
  r.ended = true;
  r.exit_code = code;
  r.reason = reason;
  r.ended_ms = ended;
  if (Status s = env_.WriteRunRecord(r.record_file, r); !s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  // A job that wrote fast and ended between two trims is held to the cap too.
  env_.CapJobLogs(JobDir(r.job_id), options_.max_log_bytes);
  reports_.RunExited({r.job_id, r.run, r.node_id, true, code, reason, ended});
}

}  // namespace gantry
