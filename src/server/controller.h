// The controller: the thread that owns the cluster's state machine (ControllerState), the
// queue of requests and node reports posted to it, the store and the committer. HTTP
// threads and agents post work and wait for the answer; the owner applies a batch of
// posts, runs a scheduling cycle when something changed, and hands the state's output (a
// store batch and effects) to the committer, which writes it in one transaction (a group
// commit) and only then answers and sends orders to agents. So a 2xx answer means
// durable, and no agent acts on a decision the store could forget.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/reloadable.h"
#include "server/notifier.h"
#include "server/pool_hooks.h"
#include "server/sessions.h"
#include "server/store.h"
#include "state/controller_state.h"

namespace gantry {

class Controller : public NodeReports {
 public:
  Controller(ControllerOptions options, std::unique_ptr<Store> store);
  ~Controller() override;

  // Rebuilds state from the store. Call once, before Start.
  Status Recover();
  // Registers nodes served by `link` (standalone: the in-process agent). A node already
  // known keeps its drain state and its jobs; jobs it runs are adopted as the agent reports.
  // `runs` is what the agent still knows (running or exited while no one listened); the
  // runs taken as this controller's own (job id, run, rank) go to `adopted` when given.
  Status AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs = {},
                     std::vector<PlacedRun>* adopted = nullptr);
  void Start();
  void Stop();
  // Replaces the known users and team policies (the standalone admin is added at start).
  void SetUsers(std::shared_ptr<const UserDirectory> users);
  const GpuCatalog& catalog() const { return options_.config.catalog; }
  // The billing calendar (fixed once Recover has run).
  const Calendar& calendar() const { return state_.accounting().calendar(); }
  TimeMs CurrentTime() const { return Now(); }

  // Called from HTTP threads: each blocks until applied and durable.
  Expected<Submitted> Submit(const Actor& who, JobSpec spec, const std::string& idempotency_key);
  // A jobs file: all the jobs or none (ControllerState::SubmitBatch); answered {"jobs": [...]}.
  Expected<Submitted> SubmitBatch(const Actor& who, std::vector<JobSpec> specs, const std::string& idempotency_key);
  // What submitting these would do now; nothing changes.
  Answer DryRun(const Actor& who, std::vector<Expected<JobSpec>> specs);
  Answer Cancel(const Actor& who, const std::string& id);
  // A job being stopped (preempted, cancelled) says its checkpoint is saved: it is killed
  // now instead of at the end of its grace period.
  Answer CheckpointDone(const Actor& who, const std::string& id);
  // Holds a pending job out of the queue, releases it, or changes it (ControllerState).
  Answer Hold(const Actor& who, const std::string& id);
  Answer Release(const Actor& who, const std::string& id);
  Answer Update(const Actor& who, const std::string& id, const JobChanges& changes);
  Answer GetJob(const Actor& who, const std::string& id);
  // Where an interactive session in job `id` goes (ControllerState::FindStreamTarget).
  Expected<StreamTarget> FindStreamTarget(const Actor& who, const std::string& id, StreamKind kind, int rank,
                                          const std::string& port_name, const std::string& action);
  Answer ListJobs(const Actor& who, const JobFilter& filter);
  Answer Queue(const Actor& who, const PageQuery& page = {});
  Answer Cluster();
  Answer Nodes(const Actor& who, const PageQuery& page = {});
  Answer Pools();
  // Each team's running and waiting jobs against its guarantee and limits (users: theirs).
  Answer Teams(const Actor& who);
  // The cluster's stored samples over "24h", "7d" or "30d", averaged in buckets (history.h).
  Answer History(const std::string& range);
  Answer SetDrain(const Actor& who, const std::string& node, int gpu, bool drain);
  Answer Events(const Actor& who, const std::string& id);
  Answer AuditLog(const Actor& who, int limit);
  // Records a call the controller did not see (refused by authentication, or handled by
  // the HTTP layer) in the audit log, with its outcome (CodeName: "ok", "forbidden", ...).
  void RecordAudit(const Actor& who, const std::string& action, const std::string& target, const std::string& outcome,
                   const std::string& detail);
  // GPUs of one node with their latest telemetry; a node's history (to a user, another team's
  // jobs unnamed).
  Answer NodeGpus(const Actor& who, const std::string& node_id);
  Answer NodeHistory(const Actor& who, const std::string& node_id, int limit);
  std::string Metrics();
  // Accounting (controller_reports.cc): usage over a window, the monthly bill, budgets and
  // the alerts sent. Users see their own team; admins see all.
  Answer Usage(const Actor& who, const UsageQuery& query);
  Answer MonthlyReport(const Actor& who, const std::string& month);
  Answer Budgets(const Actor& who);
  Answer Alerts(const Actor& who);
  // The admin token hash kept in the store (standalone creates one on first start).
  std::string MetaValue(const std::string& key);
  void SetMetaValue(const std::string& key, const std::string& value);

  // What nodes report (NodeReports; any thread): never blocks on the controller. An exit's
  // `ended_ms` (when the process ended, as the agent saw it; -1: now) closes the run's
  // ledger interval, so an exit during a server outage is billed to its real end. A failed
  // MIG re-partition requeues its job as a node fault; an unhealthy GPU is fenced at once
  // and its jobs stopped and requeued.
  void RunStarted(const RunReport& started) override;
  void RunExited(const RunReport& exited) override;
  void MigChanged(const MigReport& change) override;
  void Readings(NodeReadings readings) override;
  void GpuHealth(const GpuHealthChange& change) override;
  void Reclaim(const NodeNotice& notice) override;
  // Whether a pool's agent token may register `node` (ControllerState::AdmitPoolNode).
  Status AdmitPoolNode(const std::string& pool, const Node& node);
  // What Kubernetes says of a node (kube/node_sync.h): its Node object's labels, taints,
  // cordon or deletion, laid over the agent's report (ControllerState::ApplyKubeNode).
  void ApplyKubeNode(const std::string& node_id, const KubeNodeFacts& facts);
  // Every Node object there is (a list): each applied, and the nodes Kubernetes knew before
  // but lists no more are taken as deleted. One commit.
  void ApplyKubeNodes(const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes);
  // Kubernetes pods (ControllerState::ApplyKubePod): the link that binds and deletes them
  // (set before Start); each watch event, posted and not waited for (the posts keep the
  // watch's order, and a burst of pods shares commits); a list; why each pending pod waits.
  void SetPodLink(NodeLink* link);
  void ApplyKubePod(WatchedPod pod);
  void ApplyKubePods(const std::vector<WatchedPod>& pods);
  std::vector<KubePodWait> KubePodWaits();
  // A remote agent is alive; a node without heartbeats for node_timeout is lost.
  void Heartbeat(const std::string& node_id);

  // Waits until the queue is drained and committed (tests).
  void Sync();

  // Sign-in sessions (read back by Recover). SaveSessions writes what changed in them to
  // the store, and with `wait` returns once that is durable.
  SessionTable& sessions() { return sessions_; }
  void SaveSessions(bool wait);

 protected:  // tests/server/controller_abort_test.cc posts a change that throws
  // What a post does to the state: a change (a request or report; one that throws half-way
  // ends the process, so half of it is never committed) or a view (reads; one that throws
  // answers 500 and the server goes on).
  enum class PostKind : uint8_t { kChange, kView };
  struct Post {
    std::function<void()> apply;
    std::function<void()> after_cycle;  // runs after the batch's cycle, before the commit
    std::promise<void> done;
    PostKind kind = PostKind::kChange;
  };
  // Runs `f` on the owner thread; returns its result once the batch it was in is durable.
  template <typename F>
  auto Call(F&& f, PostKind kind = PostKind::kChange) -> decltype(f()) {
    using R = decltype(f());
    auto result = std::make_shared<std::optional<R>>();
    std::future<void> done = Enqueue([result, fn = std::forward<F>(f)]() mutable { result->emplace(fn()); }, {}, kind);
    done.get();
    return std::move(**result);
  }
  // The state, for a test's post.
  ControllerState& state() { return state_; }
  // A Call that only reads the state.
  template <typename F>
  auto View(F&& f) -> decltype(f()) {
    return Call(std::forward<F>(f), PostKind::kView);
  }
  std::future<void> Enqueue(std::function<void()> apply, std::function<void()> after_cycle = {},
                            PostKind kind = PostKind::kChange);

 private:
  // A batch on its way to the store, with whom to answer and what to send once durable.
  struct Commit {
    StoreBatch batch;
    std::vector<std::pair<std::promise<void>, std::exception_ptr>> waiters;
    Effects effects;
  };
  // Sends a commit's orders and webhooks (the committer, once the commit is durable).
  void CarryOut(Effects& effects);
  void Loop();
  void CommitLoop();
  // Gives the state the time of what it does next.
  void SetStateTime();
  TimeMs Now() const;
  void Tick();
  void RefreshQuotas();
  // A change's answer: the changed jobs' view (owner thread).
  Answer ChangedView(const Expected<JobsChanged>& changed);
  // Gives each usage line of a job ("job_id") its job's name.
  void AddJobNames(nlohmann::json& lines);
  // The ledger as of now: the store's rows, with the open intervals' newest telemetry.
  std::vector<Allocation> LedgerView(TimeMs from, TimeMs to);

  ControllerOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ReloadableFile<QuotaConfig>> quota_file_;
  std::shared_ptr<const QuotaConfig> quotas_;
  ControllerState state_;         // owner thread only
  SessionTable sessions_;         // thread-safe
  TimeMs sessions_saved_ms_ = 0;  // owner thread
  Notifier notifier_;
  PoolHooks hooks_;  // node pools' hook commands, each on its own thread

  // Metrics.
  Histogram cycle_seconds_{LatencyBuckets()};  // owner thread
  std::mutex commit_metrics_mu_;
  Histogram commit_seconds_{LatencyBuckets()};  // the committer's; guarded by commit_metrics_mu_

  // The post queue.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Post> posts_;
  bool stopping_ = false;
  std::thread thread_;

  // The committer: writes batches in order, then answers and sends.
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::deque<Commit> commits_;
  bool commit_stop_ = false;
  std::thread committer_;
};

}  // namespace gantry
