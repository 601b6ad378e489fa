// The node's runs, as logic driven by events: a start order, a stop order, a tick of the
// clock, a session's question. It launches each job under a shim in its own process group
// with the environment its GPU sharing mode needs, sends SIGTERM and then SIGKILL after the
// grace period, reaps, and reports exits. Everything it does to the machine goes through a
// NodeEnv and a JobLauncher, and its time is a Clock's, so a test drives it input by input
// with fakes and no thread (LocalAgent is its thread shell). Its run records (one small
// JSON file per run) let a restarted agent adopt the jobs that kept running.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/gpu_provider.h"
#include "agent/interactive_session.h"
#include "agent/job_launcher.h"
#include "agent/mps_daemons.h"
#include "agent/node_env.h"
#include "agent/run_record.h"
#include "core/clock.h"
#include "protocol/node_link.h"

namespace gantry {

// Whose Unix account a job runs under, when the agent runs as root (an unprivileged agent
// runs every job as itself):
//   user (or auto): the submitting user's; else the team's unix_account; else the job
//          fails (exit 126) saying so
//   agent: the agent's own (root)
// A person's own account must have a uid of at least min_job_uid (see NodeRunsOptions).
// Either way a job runs as root (uid 0) only when its team's policy allows it.
enum class RunAs : uint8_t { kAuto, kUser, kAgent };
bool ParseRunAs(const std::string& text, RunAs* out);

// Built by name: NodeRunsOptions{.state_dir = ..., .shim = ...}.
struct NodeRunsOptions {
  std::string state_dir = {};  // jobs/<id>/ holds logs, checkpoints and run records (absolute)
  std::string shim = {};       // the gantry binary (runs `gantry job-shim`)
  RunAs run_as = RunAs::kAuto;
  // A person's own account below this uid (a system account: daemon, postgres, ...), or
  // nobody (65534) or one of systemd's dynamic users, runs no job, whatever a provider or a
  // login node calls the person; a team's unix_account, which an admin names, is exempt.
  // Root stays under the team's allow_root.
  uid_t min_job_uid = 1000;
  bool mps_daemons = false;                  // MPS jobs get a daemon per GPU (else only their limits)
  GpuProvider* gpus = nullptr;               // makes MIG instances; null: none can be made
  GpuLoadSink* load_sink = nullptr;          // told what runs on each GPU (fake GPUs' readings follow it)
  int64_t max_log_bytes = int64_t{1} << 30;  // each job's logs keep their newest part up to this (0: no cap)
};

class NodeRuns {
 public:
  // `reports`, `env`, `launcher` and `clock` must outlive it. `on_run_ended` is told the
  // key of each run that ends (its sessions hang up).
  NodeRuns(NodeRunsOptions options, NodeReports& reports, NodeEnv& env, JobLauncher& launcher, const Clock& clock,
           std::function<void(const std::string&)> on_run_ended = {});

  // The inputs, from one thread at a time.
  // Reads the run records left by an earlier process: live shims are adopted, ended ones
  // reported with their exit status.
  std::vector<RunReport> Recover();
  void Start(StartOrder order);
  void Stop(const StopOrder& order);
  // Watches the runs: deadlines, exits, checkpoints saved, memory over the request (once a
  // second), logs over their cap (once a second).
  void Tick();
  // What a session in the order's run needs; an error when the run is not (or not yet)
  // here or cannot take one.
  Expected<SessionTarget> SessionTargetFor(const StreamOrder& order);
  // Whether the run still runs (attach waits for its end).
  bool Running(const std::string& key) const { return runs_.count(key) > 0; }
  // gantry shell's session ended: the run that only holds GPUs ends at the next tick.
  void EndHold(const std::string& key, int exit_code);

  // Read from any thread.
  // The job a process belongs to (its session leader is the job's shim); empty if none.
  std::string JobOfPid(int pid) const;
  // The runs going on now (for re-registering with a restarted server).
  std::vector<RunReport> ActiveRuns() const;

  // The environment a job gets for an order (also used by tests and the remote agent).
  static std::map<std::string, std::string> JobEnvironment(const StartOrder& order, const std::string& checkpoint_dir);
  std::string JobDir(const std::string& job_id) const { return options_.state_dir + "/jobs/" + job_id; }
  static std::string Key(const std::string& job_id, int run, const std::string& node) {
    return job_id + "/" + std::to_string(run) + "/" + node;
  }

 private:
  // A run this agent watches: its record (what a restarted agent needs) and what only
  // this process knows.
  struct ActiveRun : RunRecord {
    bool child = false;           // started by this process (it reaps it)
    int64_t kill_at_ms = -1;      // SIGKILL deadline after a SIGTERM
    std::string checkpoint_done;  // the job touches this file to be stopped at once
    std::string record_file;
    std::string stop_reason;
    std::vector<AssignedGpu> gpus;
    std::string stderr_log;  // why a container runtime failed is its last line
    int hold_exit = 0;       // a hold's exit status when it ends (gantry shell's: its session's)
  };
  // The account a job runs under (empty name: the agent's own, with its uid and gid), or
  // why it may not run.
  Expected<UnixAccount> JobAccount(const StartOrder& o) const;
  // The ports lent to this node's part of the run can be bound (none taken by a process
  // outside Gantry); else why not.
  Status CheckPortsFree(const StartOrder& o) const;
  // A run that could not start: reported as exited with `code` and why.
  void FailStart(const StartOrder& o, int code, const std::string& reason);
  // Makes the order's MIG changes and names the MIG device of each MIG share; false (the
  // run reported as failed) when that cannot be done.
  bool PrepareMig(StartOrder& order);
  std::vector<MigDeviceInfo> MigDevicesNow(int gpu) const;
  // The job's directories with their owners; false (the run reported as failed) when the
  // job's user cannot be given its own.
  bool PrepareJobDirs(const StartOrder& o, const UnixAccount& account);
  Status MakeJobDirs(const StartOrder& o, const UnixAccount& account);
  // A run began (or was adopted) or ended: the active runs and the GPUs' load change by it
  // alone, so a start costs the same with 10 or 10,000 runs on the node.
  void AddLoad(const std::string& key, const ActiveRun& r);
  void RemoveLoad(const std::string& key, const ActiveRun& r);
  void SetGpuLoad(const std::string& uuid);
  // The MPS daemons of the order's GPUs and the variables that reach them; false (the run
  // reported as failed and nothing held) when a daemon cannot start.
  bool AcquireMps(const StartOrder& o, std::map<std::string, std::string>* env, std::vector<std::string>* gpus);
  // Starts the job's process (in its cgroup) and records it; false when it did not start.
  bool Launch(const StartOrder& o, const UnixAccount& account, const std::map<std::string, std::string>& mps_env,
              ActiveRun& run);
  // Makes `req` run the job in its container (the runtime as the agent, the job's account
  // inside); false (the run reported as failed) when it cannot.
  bool PrepareContainerRun(const StartOrder& o, const UnixAccount& account, SpawnRequest& req, ActiveRun& r);
  // Learns the container ids of runs whose runtime has written them (GPU processes inside
  // a container are mapped to their job by it).
  void LearnContainerIds();
  // Kills jobs whose processes hold more host memory than they asked for (once a second).
  void CheckHostMemory();
  // Cuts jobs' logs over their cap (once a second).
  void TrimLogs();
  void Exited(const std::string& key, int code, std::string reason);
  // Adopts a run a record names, or reports how it ended.
  RunReport RecoverRun(const RunRecord& rec, const std::string& record_file);
  TimeMs Now() const { return clock_.NowMs(); }

  NodeRunsOptions options_;
  NodeReports& reports_;
  NodeEnv& env_;
  JobLauncher& launcher_;
  const Clock& clock_;
  std::function<void(const std::string&)> on_run_ended_;
  std::map<std::string, ActiveRun> runs_;  // by Key()
  std::unique_ptr<MpsDaemons> mps_;        // null: no MPS daemons (fake GPUs)
  int64_t memory_checked_ms_ = 0;
  int64_t logs_trimmed_ms_ = 0;
  // What runs on each GPU, kept as runs start and end (the fake GPUs' readings follow it).
  struct GpuLoad {
    int64_t milli = 0;
    int64_t memory = 0;
    std::vector<std::pair<int, int64_t>> processes;  // pid, GPU memory
  };
  std::map<std::string, GpuLoad> gpu_loads_;  // by GPU UUID

  // What other threads read (the GPU monitor, a re-registration), kept as the runs change.
  mutable std::mutex published_mu_;
  std::map<int, std::string> sessions_;            // shim pid (= session id) -> job id
  std::map<std::string, std::string> containers_;  // container id -> job id
  std::map<std::string, RunReport> active_;        // by Key()
};

}  // namespace gantry
