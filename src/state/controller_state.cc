// The state machine's core: recovery from the store's rows, node attachment and
// reconciliation with what an agent still runs, the output (store batch and effects) and
// the small helpers every transition uses. Job transitions are in
// controller_state_jobs.cc; the API's views are StateViews' (state_views.cc).
#include "state/controller_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <unordered_set>

#include "core/encoding.h"
#include "protocol/spec_json.h"
#include "state/node_json.h"

namespace gantry {

ControllerState::ControllerState(const ControllerOptions& options, std::shared_ptr<const QuotaConfig> quotas,
                                 std::function<void(const std::string&)> log)
    : options_(options),
      log_(std::move(log)),
      users_(options.users),
      quotas_(std::move(quotas)),
      ledger_(options.config.scheduler.fairshare_half_life_ms),
      autoscaling_(options.autoscaler, options.config.catalog) {
  engine_ = std::make_unique<Engine>(options_.config.catalog, options_.config.scheduler, quotas_.get());
}

void ControllerState::SetTime(TimeMs now, int64_t steady_us) {
  now_ = now;
  steady_us_ = steady_us;
}

Status ControllerState::Recover(const StoredState& stored, std::vector<Allocation> open) {
  meta_ = stored.meta;
  RestoreAutoscalerRequests();
  for (const auto& [id, doc] : stored.nodes) {
    auto node = NodeFromDoc(nlohmann::json::parse(doc, nullptr, false), options_.config.catalog);
    if (!node) return Status::Internal(fmt::format("stored node {}: {}", id, node.status().ToString()));
    nodes_.Add(node->id, nullptr, now_);
    snap_.nodes.push_back(std::move(*node));
  }
  auto index_of = [this](const std::string& id) { return nodes_.IndexOf(id); };
  for (const StoredJob& row : stored.jobs) {
    auto loaded = JobFromDoc(nlohmann::json::parse(row.doc, nullptr, false), index_of);
    if (!loaded) return loaded.status();
    JobRecord& job = loaded->record;
    next_seq_ = std::max(next_seq_, job.seq + 1);
    const std::string& id = job.spec->id;
    if (job.array_id > 0) arrays_[job.array_id][job.array_task] = job.seq;
    if (job.state == JobState::kPending && (!job.hold.empty() || !job.after.empty() || job.array_limit > 0)) {
      kept_out_.insert(job.seq);  // AdmitKeptOut queues it at the first cycle if it may be
    } else if (job.state == JobState::kPending) {
      snap_.pending.push_back({job.spec, job.submit_ms, job.attained_gpu_ms, job.evictions, loaded->nominated});
    } else if (job.state == JobState::kRunning || job.state == JobState::kStopping) {
      RunningJob r{job.spec, job.start_ms, std::move(loaded->placement), job.submit_ms};
      r.evictions = job.evictions;
      r.attained_gpu_ms = job.attained_gpu_ms;
      r.stop_at_ms = loaded->stop_at_ms;
      running_pos_[id] = static_cast<int>(snap_.running.size());
      running_nodes_[id] = NodeIdsOf(r.placement);
      snap_.running.push_back(std::move(r));
      for (const JobPort& p : job.ports) {
        if (p.port >= 0) ports_.Hold(snap_.nodes[p.node].id, p.port);  // -1: the range had none left
      }
    }
    if (job.state == JobState::kPending) CountWaiting(job, 1);
    jobs_.emplace(job.seq, std::move(job));
  }
  for (const IdempotencyRecord& r : stored.idempotency) {
    idempotency_[r.user + "\n" + r.key] = {r.job_id, r.request_hash};
  }
  // The run times of the jobs in the store, in the order they ended, teach the predictor
  // again; the waiting jobs get its predictions.
  std::vector<const JobRecord*> ended;
  for (const auto& [seq, job] : jobs_) {
    if (job.state == JobState::kSucceeded) ended.push_back(&job);
  }
  std::sort(ended.begin(), ended.end(), [](const JobRecord* a, const JobRecord* b) { return a->end_ms < b->end_ms; });
  for (const JobRecord* job : ended) predictions_.Learn(*job);
  RefreshPredictions();
  IndexPodJobs();
  return RecoverAccounting(std::move(open));
}

Status ControllerState::AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs,
                                    std::vector<PlacedRun>* adopted) {
  for (const Node& n : nodes) {
    if (Status s = ValidateNode(n, options_.config.catalog); !s.ok()) return s;
  }
  for (Node n : nodes) {
    AdoptPoolNode(n);
    int known = nodes_.IndexOf(n.id);
    if (known < 0) {
      AddNode(n, link);
    } else if (Status s = ReattachNode(known, n, link); !s.ok()) {
      return s;
    }
  }
  Reconcile(link, runs, adopted);
  dirty_ = true;
  return Status::Ok();
}

void ControllerState::AddNode(const Node& n, NodeLink* link) {
  nodes_.Add(n.id, link, now_);
  snap_.nodes.push_back(n);
  PersistNode(static_cast<int>(snap_.nodes.size()) - 1);
  NodeEvent(n.id, "registered", {{"gpus", n.gpus.size()}});
  OverlayKubeFacts(static_cast<int>(snap_.nodes.size()) - 1);
}

// A known node registers again: the inventory comes from the agent, the admin's drains
// and fences from the state.
Status ControllerState::ReattachNode(int n, const Node& inventory, NodeLink* link) {
  Node& known = snap_.nodes[n];
  NodeLink* serving = nodes_.Link(n);
  if (serving && serving != link && !serving->remote()) {
    return Status::Denied("node_id", fmt::format("node {} is this server's own (standalone) node", inventory.id));
  }
  // Runs on GPUs the node no longer has (fewer GPUs, another card or model at an index)
  // end as after a fault, before the node's GPU list changes under them.
  std::vector<std::string> stranded;
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      if (ns.node != n) continue;
      for (const GpuShare& g : ns.gpus) {
        bool kept = g.gpu < static_cast<int>(inventory.gpus.size()) &&
                    inventory.gpus[g.gpu].uuid == known.gpus[g.gpu].uuid && inventory.gpu_type() == known.gpu_type();
        if (!kept && std::find(stranded.begin(), stranded.end(), r.spec->id) == stranded.end()) {
          stranded.push_back(r.spec->id);
        }
      }
    }
  }
  nodes_.Attach(n, link);  // readings by GPU index are forgotten: the indexes may mean other GPUs now
  for (const std::string& id : stranded) {
    EndOnFault(id, n, fmt::format("its GPU on {} is gone (the node re-registered with other GPUs)", inventory.id),
               true);
  }
  Node fresh = inventory;
  fresh.state = known.state == NodeState::kDown ? NodeState::kUp : known.state;
  if (auto kube = known.labels.find(kKubeDrainLabel); kube != known.labels.end()) fresh.labels.insert(*kube);
  for (size_t g = 0; g < fresh.gpus.size() && g < known.gpus.size(); ++g) fresh.gpus[g].fenced = known.gpus[g].fenced;
  bool was_down = known.state == NodeState::kDown;
  if (was_down) nodes_.ForgetReclaim(n);  // a new machine under the old name
  known = std::move(fresh);
  nodes_.Heard(n, now_);
  OverlayKubeFacts(n);
  PersistNode(n);
  NodeEvent(inventory.id, was_down ? "back" : "registered", {{"gpus", inventory.gpus.size()}});
  return Status::Ok();
}

// Adopts what the agent still runs, finishes what ended, resends what it never got, and
// stops what the controller never assigned.
void ControllerState::Reconcile(NodeLink* link, const std::vector<RunReport>& runs, std::vector<PlacedRun>* adopted) {
  std::set<std::pair<std::string, std::string>> reported;
  for (const RunReport& r : runs) {
    JobRecord* job = Find(r.job_id);
    // The stored id, whatever spelling the agent used: indexes are keyed by it.
    const std::string id = job ? job->spec->id : r.job_id;
    reported.insert({id, r.node_id});
    bool current = job && job->runs == r.run && !IsTerminal(job->state) && job->state != JobState::kPending;
    int rank = -1;
    if (current) {
      // Only a run placed on the reporting node is its to adopt or end: another node's job
      // is neither taken over nor finished by a registration that names it.
      int node = nodes_.IndexOf(r.node_id);
      const auto& placed = RunningOf(job->spec->id).placement.nodes;
      auto here = std::find_if(placed.begin(), placed.end(), [&](const NodeShare& ns) { return ns.node == node; });
      current = node >= 0 && here != placed.end();
      if (current) rank = static_cast<int>(here - placed.begin());
    }
    if (!current) {
      if (!r.exited)
        effects_.orders.push_back(
            {link, StopOrder{r.job_id, r.run, r.node_id, 0, "not assigned by the controller", ""}});
      continue;
    }
    if (adopted) adopted->push_back({id, r.run, rank});
    if (r.exited) DoExited(id, r.run, r.node_id, r.exit_code, r.reason, r.ended_ms);
  }
  for (auto& [seq, job] : jobs_) {
    if (job.state != JobState::kRunning && job.state != JobState::kStopping) continue;
    if (!job.spec->kube_pods.empty()) continue;  // the kubelet runs pods: no agent reports them
    std::vector<int> job_nodes;
    for (const NodeShare& ns : RunningOf(job.spec->id).placement.nodes) job_nodes.push_back(ns.node);
    for (int node : job_nodes) {
      if (job.state != JobState::kRunning && job.state != JobState::kStopping) break;  // ended by an exit below
      const std::string& node_id = snap_.nodes[node].id;
      if (nodes_.Link(node) != link || reported.count({job.spec->id, node_id})) continue;
      // A part that already ended there (a gang member that exited) is neither started
      // again nor counted twice.
      auto parts = running_nodes_.find(job.spec->id);
      if (parts == running_nodes_.end() || !parts->second.count(node_id)) continue;
      if (job.state == JobState::kStopping) {
        DoExited(job.spec->id, job.runs, node_id, -1, "gone when its agent reconnected");
      } else {
        Event(job, "resent", {{"node", node_id}});
        SendStart(job, node);
      }
    }
  }
}

void ControllerState::SetQuotas(std::shared_ptr<const QuotaConfig> quotas) {
  quotas_ = std::move(quotas);
  engine_ = std::make_unique<Engine>(options_.config.catalog, options_.config.scheduler, quotas_.get());
  queue_.Invalidate();  // weights and guarantees changed: re-sort at the next cycle
  dirty_ = true;
}

std::string ControllerState::MetaValue(const std::string& key) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? std::string() : it->second;
}

void ControllerState::SetMetaValue(const std::string& key, const std::string& value) {
  meta_[key] = value;
  batch_.meta[key] = value;
}

void ControllerState::SendAfterCommit(int node_index, std::variant<StartOrder, StopOrder> order) {
  NodeLink* link = nodes_.Link(node_index);
  // A pod job's orders go to Kubernetes (the kubelet runs the pod), not to the node's agent.
  const std::string& job_id = std::visit([](const auto& o) -> const std::string& { return o.job_id; }, order);
  if (const JobRecord* job = Find(job_id); job && !job->spec->kube_pods.empty()) {
    link = pod_link_;
    if (auto* stop = std::get_if<StopOrder>(&order)) stop->kube_pod = PodOfMember(*job, node_index);
  }
  if (link) effects_.orders.push_back({link, std::move(order)});
}

ControllerState::Output ControllerState::TakeOutput() {
  // The nominations of pending jobs, looked up once if a pending job is to be written.
  std::unordered_set<std::string_view> nominated;
  bool pending_dirty = std::any_of(dirty_jobs_.begin(), dirty_jobs_.end(),
                                   [&](uint64_t seq) { return jobs_.at(seq).state == JobState::kPending; });
  for (size_t i = 0; pending_dirty && i < snap_.pending.size(); ++i) {
    if (snap_.pending[i].nominated) nominated.insert(snap_.pending[i].spec->id);
  }
  for (uint64_t seq : dirty_jobs_) {
    const JobRecord& j = jobs_.at(seq);
    JobSchedule schedule = ScheduleOf(j);
    schedule.nominated = j.state == JobState::kPending && nominated.count(j.spec->id);
    batch_.jobs.push_back({j.seq, j.spec->id, j.spec->team, j.spec->user, ToString(j.state),
                           JobToDoc(j, schedule, snap_.nodes).dump(-1, ' ', false, kReplaceBadUtf8)});
  }
  for (int n : dirty_nodes_) {
    batch_.nodes.emplace_back(snap_.nodes[n].id,
                              NodeToDoc(snap_.nodes[n], options_.config.catalog).dump(-1, ' ', false, kReplaceBadUtf8));
  }
  if (!batch_.empty()) ++version_;
  Output out{std::move(batch_), std::move(effects_)};
  batch_ = StoreBatch();
  effects_ = Effects();
  dirty_jobs_.clear();
  dirty_nodes_.clear();
  return out;
}

JobSchedule ControllerState::ScheduleOf(const JobRecord& job) const {
  if (job.state != JobState::kRunning && job.state != JobState::kStopping) return {};
  const RunningJob& r = snap_.running[running_pos_.at(job.spec->id)];
  return {&r.placement, r.stop_at_ms, false};
}

nlohmann::json ControllerState::ApiView(const JobRecord& job, bool full) const {
  nlohmann::json view = JobToApi(job, ScheduleOf(job), snap_.nodes, options_.config.catalog, full);
  if (full && job.array_id == job.seq) view["array"] = ArraySummary(job.array_id);
  // The run time the engine plans with when it is a prediction from jobs alike.
  if (job.spec->predicted_duration_ms > 0) view["predicted_duration_s"] = job.spec->predicted_duration_ms / 1000.0;
  return view;
}

JobRecord* ControllerState::Find(const std::string& id) {
  return const_cast<JobRecord*>(static_cast<const ControllerState*>(this)->Find(id));
}

const JobRecord* ControllerState::Find(const std::string& id) const {
  uint64_t seq = 0;
  auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), seq);
  if (ec == std::errc() && ptr != id.data() + id.size() && *ptr == '_') {  // "12_4": task 4 of array 12
    int task = -1;
    auto [end, tec] = std::from_chars(ptr + 1, id.data() + id.size(), task);
    if (tec != std::errc() || end != id.data() + id.size()) return nullptr;
    return JobTable().FindTask(seq, task);
  }
  if (ec != std::errc() || ptr != id.data() + id.size()) return nullptr;
  auto it = jobs_.find(seq);
  return it == jobs_.end() ? nullptr : &it->second;
}

void ControllerState::Event(const JobRecord& job, const std::string& kind, nlohmann::json detail, TimeMs at_ms) {
  batch_.events.push_back({job.spec->id, at_ms < 0 ? now_ : at_ms, kind, detail.dump(-1, ' ', false, kReplaceBadUtf8)});
}

namespace {

// `text` with each byte that is not UTF-8 replaced by U+FFFD: an audit row names what the
// caller sent (a path, an id), and a text column (PostgreSQL's) takes UTF-8 only.
std::string Utf8Text(const std::string& text) {
  if (InvalidUtf8At(text) < 0) return text;
  return nlohmann::json::parse(nlohmann::json(text).dump(-1, ' ', false, kReplaceBadUtf8)).get<std::string>();
}

}  // namespace

void ControllerState::Audit(const Actor& who, const std::string& action, const std::string& target,
                            const std::string& outcome, const std::string& detail) {
  batch_.audit.push_back(
      {now_, Utf8Text(who.user), ToString(who.role), Utf8Text(action), Utf8Text(target), outcome, Utf8Text(detail)});
}

std::string ControllerState::ActionWords(StateAction action, const std::string& subject) const {
  if (options_.audit_words) return options_.audit_words(action, subject);
  return subject.empty() ? ToString(action) : fmt::format("{} {}", ToString(action), subject);
}

Status ControllerState::Refuse(const Actor& who, const std::string& action, const std::string& target, Status refusal) {
  Audit(who, action, target, CodeName(refusal.code()), refusal.message());
  return refusal;
}

void ControllerState::NodeEvent(const std::string& node_id, const std::string& kind, const nlohmann::json& detail) {
  batch_.node_events.push_back({node_id, now_, kind, detail.dump(-1, ' ', false, kReplaceBadUtf8)});
}

}  // namespace gantry
