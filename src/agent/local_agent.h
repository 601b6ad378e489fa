// The node agent's job runner, used in-process by `gantry server --standalone`: takes
// start and stop orders, launches each job under a shim in its own process group with the
// environment its GPU sharing mode needs, sends SIGTERM and then SIGKILL after the grace
// period, reaps, and reports exits. Its run records (one small JSON file per run) let a
// restarted server adopt the jobs that kept running instead of starting them again.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/container_launch.h"
#include "agent/gpu_provider.h"
#include "agent/interactive_session.h"
#include "agent/job_launcher.h"
#include "agent/mps_daemons.h"
#include "agent/run_record.h"
#include "core/clock.h"
#include "core/thread_set.h"
#include "protocol/node_link.h"

namespace gantry {

class JobCgroups;

// Whose Unix account a job runs under, when the agent runs as root (an unprivileged agent
// runs every job as itself):
//   user (or auto): the submitting user's; else the team's unix_account; else the job
//          fails (exit 126) saying so
//   agent: the agent's own (root)
// A person's own account must have a uid of at least min_job_uid (see LocalAgentOptions).
// Either way a job runs as root (uid 0) only when its team's policy allows it.
enum class RunAs : uint8_t { kAuto, kUser, kAgent };
bool ParseRunAs(const std::string& text, RunAs* out);

// Built by name: LocalAgentOptions{.state_dir = ..., .shim = ..., .gpus = ...}.
struct LocalAgentOptions {
  std::string state_dir = {};  // jobs/<id>/ holds logs, checkpoints and run records
  std::string shim = {};       // the gantry binary (runs `gantry job-shim`)
  DurationMs poll_ms = 50;
  RunAs run_as = RunAs::kAuto;
  // A person's own account below this uid (a system account: daemon, postgres, ...), or
  // nobody (65534) or one of systemd's dynamic users, runs no job, whatever a provider or a
  // login node calls the person; a team's unix_account, which an admin names, is exempt.
  // Root stays under the team's allow_root.
  uid_t min_job_uid = 1000;
  // The MPS control command (nvidia-cuda-mps-control on real GPUs). Empty: no MPS daemons
  // (fake GPUs: their jobs get the MPS limits in their environment only).
  std::string mps_control = {};
  GpuProvider* gpus = nullptr;               // makes MIG instances; null: none can be made
  GpuLoadSink* load_sink = nullptr;          // told what runs on each GPU (fake GPUs' readings follow it)
  JobCgroups* cgroups = nullptr;             // each job in its own cgroup; null: host memory watched from /proc
  int64_t max_log_bytes = int64_t{1} << 30;  // each job's logs keep their newest part up to this (0: no cap)
  JobLauncher* launcher = nullptr;           // null: the shim launcher (real processes)
  ContainerRuntime containers = {};          // runs the jobs that name a container_image
  const Clock* clock = nullptr;              // null: the wall clock
};

class LocalAgent : public NodeLink {
 public:
  // Reports go to `reports`, which must outlive the agent.
  LocalAgent(LocalAgentOptions options, NodeReports& reports);
  ~LocalAgent() override;

  // Reads the run records left by an earlier process: live shims are adopted, ended ones
  // reported with their exit status. Call before Serve().
  std::vector<RunReport> Recover();
  void Serve();     // starts the agent's thread (orders, reaping, limits)
  void Shutdown();  // stops the agent thread; the jobs keep running

  void Start(const StartOrder& order) override;
  void Stop(const StopOrder& order) override;
  // An interactive session in one of this node's runs (agent_sessions.cc), on a thread of
  // its own; the stream is its connection to the user's client.
  void OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream> stream) override;

  // The environment a job gets for an order (also used by tests and the remote agent).
  static std::map<std::string, std::string> JobEnvironment(const StartOrder& order, const std::string& checkpoint_dir);
  std::string JobDir(const std::string& job_id) const;
  // The job a process belongs to (its session leader is the job's shim); empty if none.
  std::string JobOfPid(int pid);
  // The runs going on now (for re-registering with a restarted server).
  std::vector<RunReport> ActiveRuns();

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
  // The account a job runs under (empty user: the agent's own), or why it may not run.
  struct Account {
    std::string user;
    uid_t uid = 0;
    gid_t gid = 0;
  };
  Expected<Account> JobAccount(const StartOrder& o) const;
  // The ports lent to this node's part of the run can be bound (none taken by a process
  // outside Gantry); else why not.
  static Status CheckPortsFree(const StartOrder& o);
  void Loop();
  void DoStart(StartOrder order);
  // A run that could not start: reported as exited with `code` and why.
  void FailStart(const StartOrder& o, int code, const std::string& reason);
  // Makes the order's MIG changes and names the MIG device of each MIG share; false (the
  // run reported as failed) when that cannot be done.
  bool PrepareMig(StartOrder& order);
  // The job's directories with their owners; false (the run reported as failed) when the
  // job's user cannot be given its own.
  bool PrepareJobDirs(const StartOrder& o, const Account& account);
  Status MakeJobDirs(const StartOrder& o, const Account& account);
  // A run began (or was adopted) or ended: the active runs and the GPUs' load change by it
  // alone, so a start costs the same with 10 or 10,000 runs on the node.
  void AddLoad(const std::string& key, const ActiveRun& r);
  void RemoveLoad(const std::string& key, const ActiveRun& r);
  void SetGpuLoad(const std::string& uuid);
  // The MPS daemons of the order's GPUs and the variables that reach them; false (the run
  // reported as failed and nothing held) when a daemon cannot start.
  bool AcquireMps(const StartOrder& o, std::map<std::string, std::string>* env, std::vector<std::string>* gpus);
  // Starts the job's process (in its cgroup) and records it; false when it did not start.
  bool Launch(const StartOrder& o, const Account& account, const std::map<std::string, std::string>& mps_env,
              ActiveRun& run);
  // Makes `req` run the job in its container (the runtime as the agent, the job's account
  // inside); false (the run reported as failed) when it cannot.
  bool PrepareContainerRun(const StartOrder& o, const Account& account, SpawnRequest& req, ActiveRun& r);
  // Learns the container ids of runs whose runtime has written them (GPU processes inside
  // a container are mapped to their job by it).
  void LearnContainerIds();
  void DoStop(const StopOrder& order);
  // Sessions (agent_sessions.cc). What a session in the order's run needs, read on the
  // agent thread; an error when the run is not (or not yet) here or cannot take one.
  Expected<SessionTarget> SessionTargetFor(const StreamOrder& order);
  void RunSession(const StreamOrder& order, std::unique_ptr<ByteStream> stream);
  // Runs `f` on the agent thread and returns its result; an error if the agent stops first.
  template <typename T>
  Expected<T> OnAgentThread(std::function<Expected<T>()> f);
  // The status of a run for attach: -2 while it runs, else its exit status (-1: unknown).
  int RunEndedStatus(const std::string& key);
  // Ends every session (hangs up their commands) and joins their threads.
  void EndSessions();
  // gantry shell's session ended: the run that only holds GPUs ends now.
  void EndHold(const std::string& key, int exit_code);
  // A run's end (Exited) ends its sessions: their stop flags by run key.
  void EndRunSessions(const std::string& key);
  ThreadSet session_threads_;
  std::atomic<bool> sessions_stop_{false};
  std::mutex run_sessions_mu_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>> run_sessions_;
  void Poll();
  // Kills jobs whose processes hold more host memory than they asked for (once a second).
  void CheckHostMemory();
  int64_t memory_checked_ms_ = 0;
  // Cuts jobs' logs over their cap (once a second).
  void TrimLogs();
  int64_t logs_trimmed_ms_ = 0;
  void Exited(const std::string& key, int code, std::string reason);
  // Tells the load sink what runs on each GPU, and keeps the list of active runs.
  // Adopts a run a record names, or reports how it ended.
  RunReport RecoverRun(const RunRecord& rec, const std::string& record_file);
  TimeMs Now() const { return clock_.NowMs(); }
  static std::string Key(const std::string& job_id, int run, const std::string& node) {
    return job_id + "/" + std::to_string(run) + "/" + node;
  }

  LocalAgentOptions options_;
  NodeReports& reports_;
  JobLauncher& launcher_;
  const Clock& clock_;
  std::map<std::string, ActiveRun> runs_;  // by Key(); agent thread only
  std::unique_ptr<MpsDaemons> mps_;        // null: no MPS daemons (fake GPUs)
  std::mutex sessions_mu_;
  std::map<int, std::string> sessions_;            // shim pid (= session id) -> job id
  std::map<std::string, std::string> containers_;  // container id -> job id
  // What runs on each GPU, kept as runs start and end (the fake GPUs' readings follow it).
  struct GpuLoad {
    int64_t milli = 0;
    int64_t memory = 0;
    std::vector<std::pair<int, int64_t>> processes;  // pid, GPU memory
  };
  std::map<std::string, GpuLoad> gpu_loads_;  // by GPU UUID; agent thread only
  std::map<std::string, RunReport> active_;   // guarded by sessions_mu_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> orders_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gantry
