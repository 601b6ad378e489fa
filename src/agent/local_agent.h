// The node agent's job runner, used in-process by `gantry server --standalone` and by
// `gantry agent`: the thread shell around NodeRuns (node_runs.h). Start and stop orders
// queue for its thread, which hands them to the runs and ticks them every poll_ms;
// interactive sessions get threads of their own that ask the runs through it.
#pragma once

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
#include "agent/node_env.h"
#include "agent/node_runs.h"
#include "core/clock.h"
#include "core/thread_set.h"
#include "protocol/node_link.h"

namespace gantry {

class JobCgroups;

// Built by name: LocalAgentOptions{.state_dir = ..., .shim = ..., .gpus = ...}. What the
// runs take is said in NodeRunsOptions (node_runs.h); the rest is the shell's and the machine's.
struct LocalAgentOptions {
  std::string state_dir = {};
  std::string shim = {};
  DurationMs poll_ms = 50;  // how often the runs are watched
  RunAs run_as = RunAs::kAuto;
  uid_t min_job_uid = 1000;
  // The MPS control command (nvidia-cuda-mps-control on real GPUs). Empty: no MPS daemons
  // (fake GPUs: their jobs get the MPS limits in their environment only).
  std::string mps_control = {};
  GpuProvider* gpus = nullptr;
  GpuLoadSink* load_sink = nullptr;
  JobCgroups* cgroups = nullptr;  // each job in its own cgroup; null: host memory watched from /proc
  int64_t max_log_bytes = int64_t{1} << 30;
  JobLauncher* launcher = nullptr;   // null: the shim launcher (real processes)
  ContainerRuntime containers = {};  // runs the jobs that name a container_image
  const Clock* clock = nullptr;      // null: the wall clock
  NodeEnv* env = nullptr;            // null: this machine (with cgroups, mps_control and containers above)
};

class LocalAgent : public NodeLink {
 public:
  // Reports go to `reports`, which must outlive the agent.
  LocalAgent(LocalAgentOptions options, NodeReports& reports);
  ~LocalAgent() override;

  // Reads the run records left by an earlier process: live shims are adopted, ended ones
  // reported with their exit status. Call before Serve().
  std::vector<RunReport> Recover() { return runs_.Recover(); }
  void Serve();     // starts the agent's thread (orders, reaping, limits)
  void Shutdown();  // stops the agent thread; the jobs keep running

  void Start(const StartOrder& order) override;
  void Stop(const StopOrder& order) override;
  // An interactive session in one of this node's runs (agent_sessions.cc), on a thread of
  // its own; the stream is its connection to the user's client.
  void OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream> stream) override;

  // The environment a job gets for an order (also used by tests and the remote agent).
  static std::map<std::string, std::string> JobEnvironment(const StartOrder& order, const std::string& checkpoint_dir) {
    return NodeRuns::JobEnvironment(order, checkpoint_dir);
  }
  std::string JobDir(const std::string& job_id) const { return runs_.JobDir(job_id); }
  // The job a process belongs to; empty if none (any thread).
  std::string JobOfPid(int pid) const { return runs_.JobOfPid(pid); }
  // The runs going on now, for re-registering with a restarted server (any thread).
  std::vector<RunReport> ActiveRuns() const { return runs_.ActiveRuns(); }

 private:
  static NodeRunsOptions RunsOptions(const LocalAgentOptions& options);
  void Post(std::function<void()> work);
  void Loop();
  // Runs `f` on the agent thread and returns its result; an error if the agent stops first.
  template <typename T>
  Expected<T> OnAgentThread(std::function<Expected<T>()> f);
  // Sessions (agent_sessions.cc).
  void RunSession(const StreamOrder& order, std::unique_ptr<ByteStream> stream);
  // The status of a run for attach: -2 while it runs, else -1 (its exit file says more).
  int RunEndedStatus(const std::string& key);
  // Ends every session (hangs up their commands) and joins their threads.
  void EndSessions();
  // A run's end ends its sessions: their stop flags by run key.
  void EndRunSessions(const std::string& key);

  LocalAgentOptions options_;
  std::unique_ptr<NodeEnv> own_env_;  // this machine's, unless the options give one
  NodeEnv* env_;
  NodeRuns runs_;  // agent thread only, but for JobOfPid and ActiveRuns

  ThreadSet session_threads_;
  std::atomic<bool> sessions_stop_{false};
  std::mutex run_sessions_mu_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>> run_sessions_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> orders_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gantry
