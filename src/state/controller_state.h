// The controller's state machine: jobs, the scheduler's snapshot and its indexes, nodes
// and their links, the accounting. It has no thread, reads no clock and does no I/O: it is
// given the time (SetTime), the store's rows at recovery and the inputs (requests, node
// reports, ticks), and each change queues what must follow as values, taken out with
// TakeOutput: the rows of the next store batch and the effects (orders to nodes,
// webhooks, mail). The Controller (controller.h) owns the thread, the queue of requests, the
// store and the committer, and calls one of these at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <variant>

#include "billing/pricing.h"
#include "core/config_dir.h"
#include "core/job_changes.h"
#include "protocol/gpu_readings.h"
#include "protocol/node_link.h"
#include "sched/engine.h"
#include "sched/fair_share.h"
#include "sched/ordered_queue.h"
#include "sched/queue_order.h"
#include "sched/team_clocks.h"
#include "state/accounting.h"
#include "state/auth.h"
#include "state/autoscaling.h"
#include "state/controller_options.h"
#include "state/job_gates.h"
#include "state/job_record.h"
#include "state/kube_node_facts.h"
#include "state/kube_pod_facts.h"
#include "state/metrics.h"
#include "state/node_table.h"
#include "state/port_allocator.h"
#include "state/run_time_predictions.h"
#include "state/state_action.h"
#include "state/state_requests.h"
#include "state/store_records.h"

namespace gantry {

// What a batch does outside the controller once it is durable, as values: orders to
// nodes (through their NodeLink) and webhooks (alerts, job notifications) and mail. The committer carries them out.
struct Effects {
  struct Order {
    NodeLink* link = nullptr;
    std::variant<StartOrder, StopOrder> order;
  };
  // A job's notification names its job and event, so its delivery goes on the job's events.
  struct Webhook {
    std::string url;
    nlohmann::json body;
    std::string job_id, event;
  };
  struct Mail {
    std::string to, subject, body;
    std::string job_id, event;
  };
  std::vector<Order> orders;
  std::vector<Webhook> webhooks;
  std::vector<Mail> mails;
  std::vector<HookCall> hooks;  // node pools' scale-up and scale-down calls
  bool empty() const { return orders.empty() && webhooks.empty() && mails.empty() && hooks.empty(); }
};

// Where a new job sits in its array, and whether it goes straight into the queue (an
// array gates its own tasks: the first `limit` are queued, the rest kept out).
struct ArrayPlace {
  uint64_t array_id = 0;
  int task = -1;
  int limit = 0;
  bool queue = true;
};

// Where a job is kept: in the scheduler's queue (snap_.pending), kept out of it (held, a
// dependency, its array's limit), running (running or stopping: snap_.running, its nodes
// still running, its ports, its MIG orders), or nowhere (ended). MoveJob is the one place
// that changes it, with every index that says so.
enum class JobPlace : uint8_t { kQueued, kKeptOut, kRunning, kEnded };

// A job's move (MoveJob): its new state and place, and what its caller did already.
struct JobMove {
  JobState state = JobState::kPending;
  JobPlace place = JobPlace::kQueued;
  bool is_new = false;     // a job just made: it was nowhere and counted nowhere
  bool again = false;      // leaves and enters the same place (a changed spec: the queue's tail)
  bool dequeued = false;   // its queue entry is gone already (ApplyPlan's starts, a bulk cancel)
  int running_index = -1;  // to kRunning: its entry in snap_.running (ApplyPlan put it there)
};

class ControllerState {
 public:
  // `options.now` and `options.log` are not used here: the time comes through SetTime, and
  // `log` gets the alert and warning lines (it must be set).
  ControllerState(const ControllerOptions& options, std::shared_ptr<const QuotaConfig> quotas,
                  std::function<void(const std::string&)> log);

  // The time of what follows: wall-clock ms (every stored time) and a monotonic µs (the
  // submit-to-start latency metric only).
  void SetTime(TimeMs now, int64_t steady_us);
  TimeMs now() const { return now_; }

  // Rebuilds state from the store's rows (`open`: the ledger intervals still open). Call
  // once, first; then StartMonth.
  Status Recover(const StoredState& stored, std::vector<Allocation> open);
  // The budget month of now: [MonthStart, MonthEnd). When it is over (after recovery, or
  // when MonthOver says so), StartMonth is given its intervals from the store.
  bool MonthOver() const { return accounting_.MonthOver(now_); }
  TimeMs MonthStart() const { return accounting_.calendar().MonthStart(now_); }
  TimeMs MonthEnd() const { return accounting_.calendar().NextMonth(now_); }
  void StartMonth(const std::vector<Allocation>& month_rows);

  // Inputs. Each runs to completion; what it changed goes out with the next TakeOutput.
  // The reported runs taken as current go to `adopted` (job id, run, the node's rank) when given.
  Status AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs,
                     std::vector<PlacedRun>* adopted = nullptr);
  Expected<Submitted> Submit(const Actor& who, JobSpec spec, const std::string& key, const std::string& hash);
  // A batch (a jobs file): every job is checked first and all are made, or none (the
  // refusal names the job: "jobs[2].gpus"). The answer lists their ids; `batch` false
  // answers one job as Submit does. (controller_state_submit.cc)
  Expected<Submitted> SubmitBatch(const Actor& who, std::vector<JobSpec> specs, const std::string& key,
                                  const std::string& hash, bool batch);
  // What submitting these would do now, changing nothing: per job, the refusal, or where
  // it would start, or why it would wait.
  nlohmann::json DryRun(const Actor& who, std::vector<Expected<JobSpec>> specs);
  // The answer of a submit once it is durable: the job's view, or {"jobs": [views]}.
  nlohmann::json SubmittedView(const std::vector<std::string>& ids, bool batch);
  Expected<JobsChanged> Cancel(const Actor& who, const std::string& id);
  Expected<JobsChanged> CheckpointDone(const Actor& who, const std::string& id);
  Status SetDrain(const Actor& who, const std::string& node, int gpu, bool drain);
  // A pending job held out of the queue, released back into it, or changed while it waits
  // (controller_state_edits.cc). An admin's hold is released by admins only. `changes` are
  // the spec's fields a submitted job may change (core/job_changes.h); of a running job
  // only the time limit changes, and only admins extend it. These and Cancel and
  // CheckpointDone answer what they changed, rendered by StateViews::Changed.
  Expected<JobsChanged> Hold(const Actor& who, const std::string& id);
  Expected<JobsChanged> Release(const Actor& who, const std::string& id);
  Expected<JobsChanged> Update(const Actor& who, const std::string& id, const JobChanges& changes);
  void RunStarted(const RunReport& started);
  void RunExited(const RunReport& exited);
  void MigChanged(const MigReport& change);
  void Readings(NodeReadings readings);
  void GpuHealth(const GpuHealthChange& change);
  void Heartbeat(const std::string& node_id);
  // A spot node's reclaim notice: the node is drained, its jobs stop within the time left
  // (or the grace period, whichever is shorter) and requeue. (controller_state_pools.cc)
  void Reclaim(const NodeNotice& notice);
  // Whether a pool's agent token may register `node` (as its agent reports it): a node of
  // the pool already, or one its scale-up hook printed (never while the hook still runs, so
  // an id it did not start cannot slip in), in the pool's shape (GPU model and count, at
  // most its CPUs and memory) and within max_nodes. The refusal names what is wrong.
  Status AdmitPoolNode(const std::string& pool, const Node& node) const;
  // What Kubernetes says of a node (its Node object; kube/node_sync.h), kept and laid over
  // the agent's own report whenever it registers (controller_state_kube.cc).
  void ApplyKubeNode(const std::string& node_id, const KubeNodeFacts& facts);
  // A whole list of Node objects: each applied; a node Kubernetes spoke of before (facts
  // seen, or its Kubernetes labels kept from before a restart) and not listed now is deleted.
  void ApplyKubeNodes(const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes);
  // Kubernetes pods that ask for Gantry (controller_state_pods.cc), once a pod link is set:
  // each pod (a gang: its members together) is a job like any other, queued, placed,
  // preempted and billed by the same engine; the link binds it (its Start) and deletes it
  // (its Stop), and what the kubelet does with it comes back through ApplyKubePod. A Node
  // object with GPUs and no Gantry agent becomes a node only pods may use.
  void SetPodLink(NodeLink* link) { pod_link_ = link; }
  void ApplyKubePod(const WatchedPod& pod, bool listed = false);
  // Every pod there is (a list): each applied, the jobs of pods not listed end, and a job
  // placed whose pod is not bound yet (the bind was lost in a restart) is bound again.
  void ApplyKubePods(const std::vector<WatchedPod>& pods);
  // Why each pending pod waits, in the words of `gantry queue`.
  std::vector<KubePodWait> KubePodWaits();
  // How a job's notification of `event` went (`via` mail or webhook, `to` its address or
  // host): a notified or notify_failed event on the job.
  void NotificationDelivered(const std::string& job_id, const std::string& event, const std::string& via,
                             const std::string& to, bool delivered, const std::string& why);
  // A pool hook's result (the Controller ran it, off this thread).
  void HookFinished(const HookCall& call, const CommandResult& result);
  void Audit(const Actor& who, const std::string& action, const std::string& target, const std::string& outcome,
             const std::string& detail = "");
  void SetUsers(std::shared_ptr<const UserDirectory> users) { users_ = std::move(users); }
  // A new quota file: the engine is rebuilt and the queue re-sorted at the next cycle.
  void SetQuotas(std::shared_ptr<const QuotaConfig> quotas);
  std::string MetaValue(const std::string& key) const;
  // Sign-in sessions' documents to write with the next commit (server/sessions.h).
  void SaveSessions(std::vector<std::pair<std::string, std::string>> docs) {
    for (auto& d : docs) batch_.sessions.push_back(std::move(d));
  }
  void SetMetaValue(const std::string& key, const std::string& value);
  // The periodic work: lost nodes, time limits, accounting (flush, budgets, cost, idle).
  void Tick();
  // A scheduling cycle; due when dirty() (something changed since the last one).
  void Cycle();
  bool dirty() const { return dirty_; }
  // When a team's clock next reaches a threshold the engine acts on (the starvation bound,
  // reclaim; past one, a victim reaching min_runtime), with nothing else happening; kNever:
  // none. The server's tick cycles every
  // second anyway; a clock that jumps from event to event (a simulation) cycles there.
  TimeMs NextClockThreshold() const {
    return team_clocks_.NextThreshold(options_.config.scheduler, now_, snap_.running);
  }

  // Whether every index agrees with every job's state (the queue, the kept-out set, the
  // running entries and their nodes and ports, the waiting counts); the first disagreement
  // found, else Ok. The server runs it after every batch in sanitized builds (the tests).
  Status CheckInvariants() const;

  // What the inputs since the last call produced: the store batch and the effects.
  struct Output {
    StoreBatch batch;
    Effects effects;
  };
  Output TakeOutput();

  // Where an interactive session in a running job goes (controller_state_streams.cc): the
  // job's run, the node of `rank` (or of the named port), its link. Only the job's owner
  // or an admin may: the session runs as the job's account. Refusals are audited as `action`.
  Expected<StreamTarget> FindStreamTarget(const Actor& who, const std::string& id, StreamKind kind, int rank,
                                          const std::string& port_name, const std::string& action);

  // The API's views of jobs, queue, cluster, nodes, teams, budgets and alerts are
  // StateViews' (state/state_views.h), which reads this state.
  // GET /v1/pools: the node pools and their autoscaling now (controller_state_pools.cc).
  Answer Pools() const;
  // The jobs the engine could not start, with why (the explained plan, cached per version).
  const Plan& ExplainedPlan();
  // Dashboard (controller_state_dashboard.cc): a cluster sample for the stored history
  // once a history interval has passed (Tick).
  void SampleHistory();
  // Run-time predictions (predictions_): a succeeded job's run teaches the predictor;
  // waiting jobs get its prediction when they enter the queue and, after new runs were
  // learnt, at the next tick (controller_state_predict.cc).
  void RefreshPredictions();
  bool KnowsNode(const std::string& node_id) const { return nodes_.Knows(node_id); }
  // The API view of a job this state knows.
  nlohmann::json JobView(const std::string& id);
  // A job's name ("" for a job this state does not know).
  std::string JobName(const std::string& id) const;
  nlohmann::json BudgetStatus() const { return accounting_.BudgetStatus(*quotas_, now_); }
  const Accounting& accounting() const { return accounting_; }
  // The state's metric families (queue, allocation, GPUs, jobs, budgets, idle jobs) and
  // the submit-to-start histogram.
  void WriteMetrics(MetricsWriter& w);
  void WriteLatencyMetrics(MetricsWriter& w) const;

 private:
  // Jobs (controller_state_jobs.cc).
  // Every check of a new job (controller_state_submit.cc); fills in its user, team and
  // defaults.
  Status CheckNewJob(const Actor& who, JobSpec& spec) const;
  static nlohmann::json SubmittedIds(const std::vector<std::string>& ids, bool batch);
  Status CheckSubmitter(const Actor& who, JobSpec& spec) const;
  // Whether the cluster's nodes, or a node a pool could add, could ever hold the job (an
  // empty cluster takes anything: its nodes are still to come).
  Status CheckAdmissibleNow(const JobSpec& spec) const;
  Status CheckTeamPermissions(const Actor& who, const JobSpec& spec) const;
  const TeamPolicy& TeamOf(const std::string& team) const;
  // The job `id` if `who` may change it (jobs of the caller's team; admins: any); else the
  // refusal, audited under `action`.
  Expected<JobRecord*> JobToChange(const Actor& who, const std::string& action, const std::string& id);
  // A pending job's entry is re-keyed (its priority may have changed); a running job's
  // entry gets the new spec too, so the engine sees the new time limit.
  void ReplaceSpec(JobRecord& job, JobSpecPtr spec);
  void HoldOne(const Actor& who, JobRecord& job);
  void ReleaseOne(const Actor& who, JobRecord& job);
  // A new job from an accepted spec: recorded, queued or kept out (Gate), dirty.
  JobRecord& AddJob(const Actor& who, JobSpec spec, const ArrayPlace& place = {});
  // Counts `job` in (delta 1) or out of (-1) its user's and team's waiting jobs.
  void CountWaiting(const JobRecord& job, int delta);
  // Refuses a submit that would make more than submit_limits allow: the new jobs (array
  // tasks one each) of checked `specs`.
  Status CheckSubmitLimits(const std::vector<JobSpec>& specs) const;
  // Pending jobs kept out of the scheduler's queue and arrays (controller_state_gates.cc;
  // why a job is kept out is JobGates', state/job_gates.h, over this table).
  JobTableView JobTable() const;
  // Where a pending job goes: the queue, or kept out while JobGates says so.
  JobPlace GatedPlace(const JobRecord& job) const;
  // Each cycle: queues the kept-out jobs that may now run, fails those that never can.
  void AdmitKeptOut();
  // An array's tasks, one job each (their seqs); ArraySummary counts them by state.
  std::vector<uint64_t> AddArray(const Actor& who, const JobSpec& spec);
  nlohmann::json ArraySummary(uint64_t array_id) const;
  // The tasks `id` names when it names several: a whole array ("12", not "12_4") or a list
  // of its tasks ("12_[4-5,7]", those that exist); else empty.
  std::vector<JobRecord*> WholeArray(const std::string& id);
  // What an action on several tasks (`named`) did, for its answer.
  static JobsChanged Changed(const JobRecord& job, const std::string& named, const std::vector<JobRecord*>& tasks,
                             size_t changed);
  // The audit row's words for `action` on `subject` (options_.audit_words).
  std::string ActionWords(StateAction action, const std::string& subject) const;
  void DoExited(const std::string& job_id, int run, const std::string& node_id, int exit_code,
                const std::string& reason, TimeMs ended_ms = -1);
  void StartJob(const StartDecision& s, size_t running_index);
  void SendStart(const JobRecord& job, int node_index);
  // Lends the run its ports: MASTER_PORT on rank 0's node, each named port on every node.
  void LendPorts(JobRecord& job, const Placement& placement);
  void ReturnPorts(JobRecord& job);
  std::set<std::string> NodeIdsOf(const Placement& placement) const;
  // Where the job is kept now (its state and the kept-out set say so).
  JobPlace PlaceOf(const JobRecord& job) const;
  // Every transition of a job's state goes through here: it leaves its place (the queue,
  // the kept-out set, the running entry with its nodes, ports and MIG orders), changes its
  // state and waiting counts, and enters the new place. (controller_state_moves.cc)
  void MoveJob(JobRecord& job, const JobMove& move);
  void StopRunning(JobRecord& job, StopCause cause, const std::string& reason, DurationMs grace_ms);
  void Requeue(JobRecord& job, const std::string& event);
  // `dequeued`: a queued job's entry was taken out already (a bulk cancel's one pass).
  void Finish(JobRecord& job, JobState state, const std::string& reason, bool dequeued = false);
  // Tells those the job (or its team's defaults) names of `event` (start, end, fail, preempt).
  void NotifyJob(const JobRecord& job, const std::string& event);
  // A job's webhook must go to a host its team allows (admins: any).
  Status CheckNotifyTarget(const Actor& who, const JobSpec& spec) const;
  Status CheckPinnedGpus(const JobSpec& spec) const;
  // The index halves of MoveJob (and of a bulk cancel's one pass over the queue).
  void RemoveRunning(const std::string& id);
  void RemovePending(const std::string& id);
  void RemovePending(const std::set<std::string>& ids);
  void CancelOne(JobRecord& job, const std::string& why, bool dequeued);
  void AdvanceFairShare();
  void Dirty(const JobRecord& job) { dirty_jobs_.insert(job.seq); }
  // The scheduler's entry of a running or stopping job: the owner of its placement and kill
  // time (running_pos_ is only an index into snap_.running).
  RunningJob& RunningOf(const std::string& id) { return snap_.running[running_pos_.at(id)]; }
  // What a job's scheduler entry holds, for its API view (the nomination is not looked up).
  JobSchedule ScheduleOf(const JobRecord& job) const;
  nlohmann::json ApiView(const JobRecord& job, bool full) const;
  JobRecord* Find(const std::string& id);
  const JobRecord* Find(const std::string& id) const;
  // Queues an order for the next output's effects (none when the node has no link).
  void SendAfterCommit(int node_index, std::variant<StartOrder, StopOrder> order);
  // A job event at `at_ms` (-1: now).
  void Event(const JobRecord& job, const std::string& kind, nlohmann::json detail = nlohmann::json::object(),
             TimeMs at_ms = -1);
  void NodeEvent(const std::string& node_id, const std::string& kind, const nlohmann::json& detail);
  // Audits a refusal and returns it.
  Status Refuse(const Actor& who, const std::string& action, const std::string& target, Status refusal);
  void PersistNode(int n) { dirty_nodes_.insert(n); }
  // Nodes and GPUs (controller_state_gpus.cc).
  void AddNode(const Node& n, NodeLink* link);
  Status ReattachNode(int n, const Node& inventory, NodeLink* link);
  void Reconcile(NodeLink* link, const std::vector<RunReport>& runs, std::vector<PlacedRun>* adopted);
  void DoGpuHealth(const std::string& node_id, int gpu, bool healthy, const std::string& reason);
  void NodeLost(int n);
  // Ends a running job at once as after a fault of node `n`: its other nodes (and `n` too
  // with `stop_there`) are told to stop it; it requeues within max_retries.
  void EndOnFault(const std::string& id, int n, const std::string& reason, bool stop_there);
  // A time-sliced job whose own processes use more GPU memory than its share is stopped.
  void CheckGpuMemory(int node, int gpu, const GpuSample& sample);
  // A new XID on a GPU with MPS jobs: every client of its MPS server gets the fault, so all
  // of them stop and requeue, and the GPU takes no new job until they are gone.
  void CheckMpsFault(int node, int gpu, const GpuSample& sample);
  // Lifts the hold of MPS GPUs whose faulted clients have all exited.
  void ReleaseMpsHolds();
  // The node index and GPU of (node id, GPU index); {-1, null} when there is none.
  std::pair<int, Gpu*> LocateGpu(const std::string& node_id, int gpu);
  void WriteGpuMetrics(MetricsWriter& w) const;
  // The pending queue in order for a cycle (queue_, sched/ordered_queue.h), and the teams'
  // clocks the engine reads (controller_state_queue.cc). Views and dry runs only merge the
  // new jobs in (MergeNewPending): reading the queue never re-keys it, so what a user
  // looks at does not change what the next cycle decides.
  QueuePolicy QueuePolicyNow() const;
  void OrderPending();
  void MergeNewPending();
  void UpdateTeamClocks();
  // What follows from the accounting (controller_state_billing.cc).
  Status RecoverAccounting(std::vector<Allocation> open);
  void OpenLedger(const JobRecord& job, const Placement& placement);
  void CloseLedger(JobRecord& job, TimeMs end_ms);
  void AccountingTick();
  void CheckBudgets(TimeMs now);
  void CheckJobs(TimeMs now);
  void CheckCostLimit(JobRecord& job, TimeMs now);
  void CheckIdle(JobRecord& job, TimeMs now);
  void Alert(const std::string& kind, const std::string& team, const std::string& message, nlohmann::json detail);
  void WriteBillingMetrics(MetricsWriter& w) const;
  // Node pools (controller_state_pools.cc): the autoscaler's decision each few seconds on
  // the waiting jobs and the pools' nodes; a registering node of a pool gets its labels.
  void Autoscale();
  // The pools' nodes as the autoscaler sees them (down nodes left out).
  std::vector<PoolNode> PoolNodes() const;
  void AdoptPoolNode(Node& node);
  // The autoscaler's requests in the store's meta, so a restarted or new leader knows the
  // nodes asked for (written when they change; read at Recover).
  void SaveAutoscalerRequests();
  void RestoreAutoscalerRequests();
  void ReturnPoolNode(const std::string& node_id);
  void WritePoolMetrics(MetricsWriter& w) const;

  const ControllerOptions& options_;
  std::function<void(const std::string&)> log_;
  std::shared_ptr<const UserDirectory> users_;
  std::shared_ptr<const QuotaConfig> quotas_;
  std::unique_ptr<Engine> engine_;
  TimeMs now_ = 0;
  int64_t steady_us_ = 0;

  Snapshot snap_;
  std::map<uint64_t, JobRecord> jobs_;
  // Jobs pending (held ones too) by user and by team, for submit_limits; moved with each
  // job's state by CountWaiting.
  std::unordered_map<std::string, int> waiting_by_user_;
  std::unordered_map<std::string, int> waiting_by_team_;
  // MIG changes planned for a job's start, by job: (node index, order); sent with the start.
  std::unordered_map<std::string, std::vector<std::pair<int, MigOrder>>> mig_orders_;
  NodeTable nodes_;      // beside snap_.nodes, by the same index
  PortAllocator ports_;  // ports lent to running jobs, per node
  // job id -> the nodes whose part of the run still runs (a node reports each part once)
  std::unordered_map<std::string, std::set<std::string>> running_nodes_;
  std::unordered_map<std::string, int> running_pos_;  // job id -> index in snap_.running
  std::set<uint64_t> kept_out_;                       // seqs of pending jobs not in snap_.pending (WhyKeptOut says why)
  bool gates_dirty_ = true;                           // a job started, ended or was released: AdmitKeptOut has work
  std::unordered_map<uint64_t, std::map<int, uint64_t>> arrays_;            // array id -> task -> seq
  std::map<std::string, std::pair<std::string, std::string>> idempotency_;  // user\nkey -> job id, hash
  std::map<std::string, std::string> meta_;
  std::map<std::string, KubeNodeFacts> kube_nodes_;  // node id -> its Node object's facts, as last seen
  // Lays a node's Kubernetes facts over its record: labels and taints, and a drain while
  // cordoned or deleted (controller_state_kube.cc).
  void OverlayKubeFacts(int n);
  // Pods (controller_state_pods.cc).
  struct PodTrack {
    std::string job_id;
    int member = 0;  // its rank in the job's placement
    KubePodJob pod;  // as last seen
  };
  NodeLink* pod_link_ = nullptr;
  std::map<std::string, PodTrack> pod_jobs_;  // pod key (namespace/name) -> its job
  // A gang's members seen while it has no job yet: namespace/gang -> pod key -> pod.
  std::map<std::string, std::map<std::string, KubePodJob>> gangs_waiting_;
  std::map<std::string, KubePodWait> pod_refusals_;  // pod key -> why Gantry cannot run it
  std::map<std::string, KubePodJob> refused_pods_;   // pod key -> a readable pod refused (tried again)
  TimeMs last_pod_retry_ms_ = 0;
  void PodArrived(const KubePodJob& pod);
  void RetryRefusedPods();
  void IndexPodJobs();
  void PodChanged(PodTrack& track, const KubePodJob& pod, bool listed);
  void PodGone(const std::string& key, const std::string& why);
  // Ends the run of a placed pod job's member (its pod gone or stopped).
  void EndPodRun(const PodTrack& track, JobRecord& job, const std::string& why);
  // A pod deleted past its grace period whose object stays (a finalizer): its run is over.
  void EndPodRunsPastTheirDeletion();
  void FormGang(const std::string& gang_key);
  void CreatePodJob(const std::vector<KubePodJob>& members);
  void RefusePods(const std::vector<KubePodJob>& members, const Status& why);
  // The job ended: its pods that still wait or run are deleted.
  void PodJobEnded(const JobRecord& job);
  // The pod ("namespace/name/uid") of a pod job's member on node `node_index` ("" if none).
  std::string PodOfMember(const JobRecord& job, int node_index);
  void AddKubeOnlyNode(const std::string& id, const KubeNodeFacts& facts);
  TimeMs last_history_ms_ = -1;  // when SampleHistory last took a sample
  RunTimePredictions predictions_;
  uint64_t next_seq_ = 1;
  FairShareLedger ledger_;
  OrderedQueue queue_;      // keeps snap_.pending in queue order
  TeamClocks team_clocks_;  // starving and below-guarantee since
  bool dirty_ = true;       // something changed since the last cycle
  uint64_t version_ = 0;    // bumps on every output with rows; caches the explained queue
  uint64_t queue_cache_version_ = UINT64_MAX;
  std::shared_ptr<Plan> queue_cache_;

  Accounting accounting_;
  Autoscaling autoscaling_;
  std::map<std::string, uint64_t> reclaims_by_pool_;  // reclaim notices per pool ("" none)

  // The output being built.
  StoreBatch batch_;
  std::set<uint64_t> dirty_jobs_;
  std::set<int> dirty_nodes_;
  Effects effects_;

  Histogram submit_to_start_seconds_{LatencyBuckets()};
  std::map<std::string, uint64_t> counters_;

  friend class StateViews;                // the presenter: reads the state for the API's views
  friend struct ControllerStateTestPeer;  // tests/state: breaks an index on purpose
};

}  // namespace gantry
