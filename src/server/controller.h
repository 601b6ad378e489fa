// The controller: the one owner of cluster state (nodes, jobs, queue). HTTP threads and
// agents post work to its thread and wait for the answer; the owner applies a batch of
// posts, runs a scheduling cycle when something changed, writes everything in one store
// transaction (a group commit), and only then answers and sends orders to agents. So a
// 2xx answer means durable, and no agent acts on a decision the store could forget.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <variant>

#include "billing/pricing.h"
#include "billing/report.h"
#include "core/config_dir.h"
#include "core/reloadable.h"
#include "protocol/gpu_readings.h"
#include "protocol/node_link.h"
#include "sched/engine.h"
#include "sched/fair_share.h"
#include "sched/queue_order.h"
#include "server/accounting.h"
#include "server/auth.h"
#include "server/job_record.h"
#include "server/metrics.h"
#include "server/notifier.h"
#include "server/store.h"

namespace gantry {

// What the controller answers a request with: a JSON body, or the Status saying why not.
// Only the HTTP layer turns a Status into an HTTP status.
using Answer = Expected<nlohmann::json>;

// A submit's answer: the job, and whether this call created it (false: the replay of an
// earlier call with the same Idempotency-Key).
struct Submitted {
  nlohmann::json job;
  bool created = true;
};

// What a batch does outside the controller once it is durable, as values: orders to
// nodes (through their NodeLink) and alert webhooks. The committer carries them out.
struct Effects {
  struct Order {
    NodeLink* link = nullptr;
    std::variant<StartOrder, StopOrder> order;
  };
  struct Webhook {
    std::string url;
    nlohmann::json body;
  };
  std::vector<Order> orders;
  std::vector<Webhook> webhooks;
  bool empty() const { return orders.empty() && webhooks.empty(); }
};

struct JobFilter {
  std::string state;  // empty: any; "active": pending, running or stopping
  std::string team;
  std::string user;
  int limit = 500;
};

// GET /v1/usage: a window, an optional team, a grouping.
struct UsageQuery {
  TimeMs from = 0;
  TimeMs to = kNever;
  std::string team;
  std::string by = "team";
};

struct ControllerOptions {
  ConfigSet config;
  PricingConfig pricing;                        // the `pricing` section of gpu_types.yaml
  std::string quotas_path;                      // re-read when it changes; empty: config.quotas stays
  DurationMs tick_ms = 1000;                    // periodic cycle (time limits, ages, reloads)
  DurationMs kill_wait_ms = 30000;              // cancel: SIGTERM, then SIGKILL after this
  DurationMs fault_grace_ms = 10000;            // jobs on a GPU that turned unhealthy
  DurationMs node_timeout_ms = 60000;           // a node silent this long is lost; its jobs requeue
  std::function<TimeMs()> now;                  // the clock; wall clock when empty
  bool defer_slow_cycles = true;                // false: a cycle after every batch, however long (tests)
  DurationMs ledger_flush_ms = 60000;           // open ledger intervals' telemetry sums are stored this often
  std::function<void(const std::string&)> log;  // alerts and warnings; stderr when empty
  // Known users and team policies (priority classes, Unix accounts); null: nobody beyond
  // the callers themselves, every team with the default policy.
  std::shared_ptr<const UserDirectory> users;
};

class Controller : public NodeReports {
 public:
  Controller(ControllerOptions options, std::unique_ptr<Store> store);
  ~Controller() override;

  // Rebuilds state from the store. Call once, before Start.
  Status Recover();
  // Registers nodes served by `link` (standalone: the in-process agent). A node already
  // known keeps its drain state and its jobs; jobs it runs are adopted as the agent reports.
  // `runs` is what the agent still knows (running or exited while no one listened).
  Status AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs = {});
  void Start();
  void Stop();
  // Replaces the known users and team policies (the standalone admin is added at start).
  void SetUsers(std::shared_ptr<const UserDirectory> users);
  const GpuCatalog& catalog() const { return options_.config.catalog; }
  // The billing calendar (fixed once Recover has run).
  const Calendar& calendar() const { return accounting_.calendar(); }
  TimeMs CurrentTime() const { return Now(); }

  // Called from HTTP threads: each blocks until applied and durable.
  Expected<Submitted> Submit(const Actor& who, JobSpec spec, const std::string& idempotency_key);
  Answer Cancel(const Actor& who, const std::string& id);
  // A job being stopped (preempted, cancelled) says its checkpoint is saved: it is killed
  // now instead of at the end of its grace period.
  Answer CheckpointDone(const Actor& who, const std::string& id);
  Answer GetJob(const Actor& who, const std::string& id);
  Answer ListJobs(const Actor& who, const JobFilter& filter);
  Answer Queue(const Actor& who);
  Answer Cluster();
  Answer Nodes();
  Answer SetDrain(const Actor& who, const std::string& node, int gpu, bool drain);
  Answer Events(const Actor& who, const std::string& id);
  Answer AuditLog(const Actor& who, int limit);
  // Records a call the controller did not see (refused by authentication, or handled by
  // the HTTP layer) in the audit log, with its outcome (CodeName: "ok", "forbidden", ...).
  void RecordAudit(const Actor& who, const std::string& action, const std::string& target, const std::string& outcome,
                   const std::string& detail);
  // GPUs of one node with their latest telemetry; a node's history.
  Answer NodeGpus(const std::string& node_id);
  Answer NodeHistory(const std::string& node_id, int limit);
  std::string Metrics();
  // Accounting (controller_billing.cc): usage over a window, the monthly bill, budgets and
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
  // A remote agent is alive; a node without heartbeats for node_timeout is lost.
  void Heartbeat(const std::string& node_id);

  // Waits until the queue is drained and committed (tests).
  void Sync();

 private:
  struct Post {
    std::function<void()> apply;
    std::function<void()> after_cycle;  // runs after the batch's cycle, before the commit
    std::promise<void> done;
  };
  // Runs `f` on the owner thread; returns its result once the batch it was in is durable.
  template <typename F>
  auto Call(F&& f) -> decltype(f()) {
    using R = decltype(f());
    auto result = std::make_shared<std::optional<R>>();
    std::future<void> done = Enqueue([result, fn = std::forward<F>(f)]() mutable { result->emplace(fn()); });
    done.get();
    return std::move(**result);
  }
  std::future<void> Enqueue(std::function<void()> apply, std::function<void()> after_cycle = {});
  // A batch on its way to the store, with whom to answer and what to send once durable.
  struct Commit {
    StoreBatch batch;
    std::vector<std::pair<std::promise<void>, std::exception_ptr>> waiters;
    Effects effects;
  };
  // Sends a commit's orders and webhooks (the committer, once the commit is durable).
  void CarryOut(Effects& effects);
  // Queues an order for the next commit's effects (none when the node has no link).
  void SendAfterCommit(int node_index, std::variant<StartOrder, StopOrder> order);
  void Loop();
  Commit PrepareCommit();
  void CommitLoop();

  // State changes (owner thread only). controller_jobs.cc
  Expected<Submitted> DoSubmit(const Actor& who, JobSpec spec, const std::string& key, const std::string& hash);
  // Who a job is for and what its team may ask: team admins submit only for members of
  // their team, admins for known users; priority classes and preemptible: false per team.
  Status CheckSubmitter(const Actor& who, JobSpec& spec) const;
  Status CheckTeamPermissions(const Actor& who, const JobSpec& spec) const;
  const TeamPolicy& TeamOf(const std::string& team) const;
  Answer DoCancel(const Actor& who, const std::string& id);
  void DoExited(const std::string& job_id, int run, const std::string& node_id, int exit_code,
                const std::string& reason, TimeMs ended_ms = -1);
  void Cycle();
  void Tick();
  void StartJob(const StartDecision& s, size_t running_index);
  void SendStart(const JobRecord& job, int node_index);
  void StopRunning(JobRecord& job, StopCause cause, const std::string& reason, DurationMs grace_ms);
  void Requeue(JobRecord& job, const std::string& event);
  void Finish(JobRecord& job, JobState state, const std::string& reason);
  void RemoveRunning(const std::string& id);
  void RemovePending(const std::string& id);
  void Dirty(const JobRecord& job) { dirty_jobs_.insert(job.seq); }
  // A job event at `at_ms` (-1: now).
  void Event(const JobRecord& job, const std::string& kind, nlohmann::json detail = nlohmann::json::object(),
             TimeMs at_ms = -1);
  void NodeEvent(const std::string& node_id, const std::string& kind, const nlohmann::json& detail);
  void DoGpuHealth(const std::string& node_id, int gpu, bool healthy, const std::string& reason);
  void NodeLost(int n);
  // Ends a running job at once as after a fault of node `n`: its other nodes (and `n` too
  // with `stop_there`) are told to stop it; it requeues within max_retries.
  void EndOnFault(const std::string& id, int n, const std::string& reason, bool stop_there);
  // A time-sliced job whose own processes use more GPU memory than its share is stopped.
  void CheckGpuMemory(int node, int gpu, const GpuSample& sample);
  void WriteGpuMetrics(MetricsWriter& w);
  // An audit row: `outcome` is "created", "ok" or the CodeName of a refusal.
  void Audit(const Actor& who, const std::string& action, const std::string& target, const std::string& outcome,
             const std::string& detail = "");
  // Audits a refusal and returns it.
  Status Refuse(const Actor& who, const std::string& action, const std::string& target, Status refusal);
  void PersistNode(int n);
  void RefreshQuotas();
  // controller_queue.cc: the pending queue kept in order across cycles.
  void OrderPending(bool force_reorder = false);
  void Reorder();
  QueueContext Context() const;
  void Nominate(const std::string& id);
  void DropStarted(const Plan& plan);
  void AdvanceFairShare();
  JobRecord* Find(const std::string& id);
  TimeMs Now() const;
  void Log(const std::string& line) const;
  // controller_billing.cc: what follows from the accounting (released events, alerts,
  // budget holds, job cost limits, idle jobs).
  Status RecoverAccounting();
  void OpenLedger(const JobRecord& job);
  void CloseLedger(JobRecord& job, TimeMs end_ms);
  void AccountingTick();
  void SetMonth(TimeMs now);
  void CheckBudgets(TimeMs now);
  void CheckJobs(TimeMs now);
  void CheckCostLimit(JobRecord& job, TimeMs now);
  void CheckIdle(JobRecord& job, TimeMs now);
  void Alert(const std::string& kind, const std::string& team, const std::string& message, nlohmann::json detail);
  std::vector<Allocation> LedgerView(TimeMs from, TimeMs to);
  void WriteBillingMetrics(MetricsWriter& w);

  ControllerOptions options_;
  std::unique_ptr<Store> store_;
  std::shared_ptr<const QuotaConfig> quotas_;
  std::unique_ptr<ReloadableFile<QuotaConfig>> quota_file_;
  std::unique_ptr<Engine> engine_;

  // Owner-thread state.
  Snapshot snap_;
  std::map<uint64_t, JobRecord> jobs_;
  std::unordered_map<std::string, uint64_t> pending_running_;  // id -> seq of active jobs
  std::unordered_map<std::string, int> node_index_;
  // The node index and GPU of (node id, GPU index); {-1, null} when there is none.
  std::pair<int, Gpu*> LocateGpu(const std::string& node_id, int gpu);
  // MIG changes planned for a job's start, by job: (node index, order); sent with the start.
  std::unordered_map<std::string, std::vector<std::pair<int, MigOrder>>> mig_orders_;
  std::vector<NodeLink*> node_link_;
  std::vector<TimeMs> last_seen_;                       // per node: the last heartbeat of its (remote) agent
  std::unordered_map<std::string, int> running_nodes_;  // job id -> node processes still running
  std::unordered_map<std::string, int> running_pos_;    // job id -> index in snap_.running
  std::map<std::string, std::pair<std::string, std::string>> idempotency_;  // user\nkey -> job id, hash
  std::map<std::string, std::string> meta_;
  // Latest reading of each GPU: node index -> GPU index -> (reading, when).
  std::map<int, std::map<int, std::pair<GpuSample, TimeMs>>> telemetry_;
  uint64_t next_seq_ = 1;
  FairShareLedger ledger_;
  std::map<std::string, TimeMs> below_since_;
  // snap_.pending[0, ordered_) is in queue order with keys pending_keys_ (as of the last
  // re-sort, like Slurm's PriorityCalcPeriod); jobs after it arrived since the last cycle.
  std::vector<QueueEntry> pending_keys_;
  size_t ordered_ = 0;
  TimeMs last_reorder_ = -1;
  std::map<std::string, double> factors_;
  std::map<std::string, int> guarantee_levels_;
  bool dirty_ = true;     // something changed since the last cycle
  uint64_t version_ = 0;  // bumps on every change; caches the explained queue
  uint64_t queue_cache_version_ = UINT64_MAX;
  std::shared_ptr<Plan> queue_cache_;

  // The ledger (owner thread, except its calendar and prices: fixed after Recover).
  Accounting accounting_;
  Notifier notifier_;

  // The batch being built.
  StoreBatch batch_;
  std::set<uint64_t> dirty_jobs_;
  std::set<int> dirty_nodes_;
  Effects effects_;  // orders and webhooks, carried out after the commit

  // Metrics (owner thread).
  Histogram cycle_seconds_{LatencyBuckets()};
  Histogram submit_to_start_seconds_{LatencyBuckets()};
  std::mutex commit_metrics_mu_;
  Histogram commit_seconds_{LatencyBuckets()};  // the committer's; guarded by commit_metrics_mu_
  std::map<std::string, uint64_t> counters_;

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
