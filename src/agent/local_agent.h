// The node agent's job runner, used in-process by `gantry server --standalone`: takes
// start and stop orders, launches each job under a shim in its own process group with the
// environment its GPU sharing mode needs, sends SIGTERM and then SIGKILL after the grace
// period, reaps, and reports exits. Its run records (one small JSON file per run) let a
// restarted server adopt the jobs that kept running instead of starting them again.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/mps_daemons.h"
#include "server/agent_link.h"

namespace gantry {

class FakeGpuProvider;
class JobCgroups;

// Whose Unix account a job runs under, when the agent runs as root (an unprivileged agent
// runs every job as itself):
//   user (or auto): the submitting user's; else the team's unix_account; else the job
//          fails (exit 126) saying so
//   agent: the agent's own (root)
// Either way a job runs as root (uid 0) only when its team's policy allows it.
enum class RunAs : uint8_t { kAuto, kUser, kAgent };
bool ParseRunAs(const std::string& text, RunAs* out);

struct LocalAgentOptions {
  std::string state_dir;  // jobs/<id>/ holds logs, checkpoints and run records
  std::string shim;       // the gantry binary (runs `gantry job-shim`)
  DurationMs poll_ms = 50;
  FakeGpuProvider* fake_gpus = nullptr;  // told what runs where, so its readings follow the jobs
  RunAs run_as = RunAs::kAuto;
  // The MPS control command. Empty: nvidia-cuda-mps-control on real GPUs, and no MPS
  // daemons on fake ones (their jobs get the MPS limits in their environment only).
  std::string mps_control;
  GpuProvider* gpus = nullptr;       // makes MIG instances (fake_gpus when null)
  JobCgroups* cgroups = nullptr;     // each job in its own cgroup; null: host memory watched from /proc
  int64_t max_log_bytes = 64 << 20;  // each job log keeps its newest part up to this (0: no cap)
};

// Where the agent's reports go (the controller).
struct AgentReports {
  std::function<void(const std::string& job_id, int run)> started;
  // `ended_ms`: when the job's process ended (wall clock), -1 when unknown.
  std::function<void(const std::string& job_id, int run, const std::string& node_id, int exit_code,
                     const std::string& reason, TimeMs ended_ms)>
      exited;
  // A MIG re-partition was made (error empty) or failed: the GPU's MIG devices now.
  std::function<void(const std::string& node_id, int gpu, const std::vector<MigDeviceInfo>& devices,
                     const std::string& job_id, const std::string& error)>
      mig;
};

class LocalAgent : public AgentLink {
 public:
  LocalAgent(LocalAgentOptions options, AgentReports reports);
  ~LocalAgent() override;

  // Reads the run records left by an earlier process: live shims are adopted, ended ones
  // reported with their exit status. Call before Start().
  std::vector<RunReport> Recover();
  void Start();
  void Shutdown();  // stops the agent thread; the jobs keep running

  void Start(const StartOrder& order) override;
  void Stop(const StopOrder& order) override;

  // The environment a job gets for an order (also used by tests and the remote agent).
  static std::map<std::string, std::string> JobEnvironment(const StartOrder& order, const std::string& checkpoint_dir);
  std::string JobDir(const std::string& job_id) const;
  // The job a process belongs to (its session leader is the job's shim); empty if none.
  std::string JobOfPid(int pid);
  // The runs going on now (for re-registering with a restarted server).
  std::vector<RunReport> ActiveRuns();

 private:
  struct Run {
    std::string job_id;
    int run = 0;
    std::string node_id;
    pid_t pid = 0;                 // 0: a job without a command (it only holds its GPUs)
    bool child = false;            // started by this process (waitpid works)
    int64_t ends_at_ms = -1;       // commandless jobs with an estimated duration
    int64_t kill_at_ms = -1;       // SIGKILL deadline after a SIGTERM
    int64_t memory_limit_mib = 0;  // host memory the job asked for (memory_gb); 0: no limit
    std::string checkpoint_done;   // the job touches this file to be stopped at once
    std::string cgroup;            // its cgroup's name under the agent's jobs cgroup; empty: none
    std::string exit_file;
    std::string record_file;
    std::string stop_reason;
    std::vector<AssignedGpu> gpus;
  };
  // The account a job runs under (empty user: the agent's own), or why it may not run.
  struct Account {
    std::string user;
    uid_t uid = 0;
    gid_t gid = 0;
  };
  Expected<Account> JobAccount(const StartOrder& o) const;
  void Loop();
  void DoStart(StartOrder order);
  // Makes the order's MIG changes and names the MIG device of each MIG share; false (the
  // run reported as failed) when that cannot be done.
  bool PrepareMig(StartOrder& order);
  void DoStop(const StopOrder& order);
  void Poll();
  // Kills jobs whose processes hold more host memory than they asked for (once a second).
  void CheckHostMemory();
  int64_t memory_checked_ms_ = 0;
  // Cuts job logs over their cap (once a second).
  void TrimLogs();
  int64_t logs_trimmed_ms_ = 0;
  void Exited(const std::string& key, int code, std::string reason);
  void UpdateFakeLoad();
  static std::string Key(const std::string& job_id, int run, const std::string& node) {
    return job_id + "/" + std::to_string(run) + "/" + node;
  }

  LocalAgentOptions options_;
  AgentReports reports_;
  std::map<std::string, Run> runs_;  // by Key(); agent thread only
  std::unique_ptr<MpsDaemons> mps_;  // null: no MPS daemons (fake GPUs)
  std::mutex sessions_mu_;
  std::map<int, std::string> sessions_;      // shim pid (= session id) -> job id
  std::map<std::string, bool> known_uuids_;  // GPUs that had load (to clear it)
  std::map<std::string, RunReport> active_;  // guarded by sessions_mu_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> orders_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gantry
