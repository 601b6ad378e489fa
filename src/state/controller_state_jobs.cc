// Job transitions in the controller's state machine: cancel, start, stop, exit, requeue
// (submit: controller_state_submit.cc); and the scheduling cycle that turns the engine's
// plan into starts and preemptions.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sched/apply_plan.h"
#include "sched/usage.h"
#include "state/controller_state.h"

namespace gantry {

Expected<JobsChanged> ControllerState::CheckpointDone(const Actor& who, const std::string& id) {
  const std::string action = ActionWords(StateAction::kCheckpointDone, id);
  JobRecord* job = Find(id);
  if (!job || !who.SeesTeam(job->spec->team)) {
    return Refuse(who, action, id, {StatusCode::kNotFound, "no job " + id, "id"});
  }
  if (job->state != JobState::kStopping) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} is {}, not stopping: nothing waits for its checkpoint",
                                                         id, ToString(job->state))));
  }
  // The stored id: the URL may spell it another way ("012", "12_3"), and the running index
  // and the agent know the job by this one.
  const std::string& stored_id = job->spec->id;
  RunningJob& entry = RunningOf(stored_id);
  entry.stop_at_ms = now_;
  Event(*job, "checkpoint_done", {{"by", who.user}});
  for (const NodeShare& ns : entry.placement.nodes) {
    SendAfterCommit(ns.node, StopOrder{stored_id, job->runs, snap_.nodes[ns.node].id, 0, "checkpoint saved", ""});
  }
  Audit(who, action, id, "ok");
  Dirty(*job);
  return JobsChanged::One(stored_id, id);
}

void ControllerState::RunStarted(const RunReport& started) {
  JobRecord* job = Find(started.job_id);
  if (!job || job->runs != started.run || IsTerminal(job->state) || job->state == JobState::kPending) return;
  // Only a node the run is placed on (and still runs on) says it started there.
  auto nodes = running_nodes_.find(job->spec->id);
  if (nodes == running_nodes_.end() || !nodes->second.count(started.node_id)) return;
  Event(*job, "running", {{"run", started.run}, {"node", started.node_id}});
}

void ControllerState::RunExited(const RunReport& e) {
  DoExited(e.job_id, e.run, e.node_id, e.exit_code, e.reason, e.ended_ms);
}

JobRecord& ControllerState::AddJob(const Actor& who, JobSpec spec, const ArrayPlace& place) {
  JobRecord job;
  job.seq = next_seq_++;
  job.array_id = place.array_id;
  job.array_task = place.task;
  job.array_limit = place.limit;
  if (place.array_id > 0) arrays_[place.array_id][place.task] = job.seq;
  spec.id = std::to_string(job.seq);
  if (!spec.dependency.empty()) job.after = *ParseDependency(spec.dependency);
  job.spec = predictions_.Apply(std::make_shared<const JobSpec>(std::move(spec)));
  job.submit_ms = now_;
  job.submit_steady_us = steady_us_;
  Event(job, "submitted", {{"by", who.user}});
  counters_["submitted"]++;
  dirty_ = true;
  JobRecord& stored = jobs_.emplace(job.seq, std::move(job)).first->second;
  // An array gates its own tasks (place.queue); any other job by its hold and dependencies.
  JobPlace to = place.array_id == 0 ? GatedPlace(stored) : place.queue ? JobPlace::kQueued : JobPlace::kKeptOut;
  MoveJob(stored, {.state = JobState::kPending, .place = to, .is_new = true});
  return stored;
}

void ControllerState::CountWaiting(const JobRecord& job, int delta) {
  for (auto [counts, key] : {std::pair{&waiting_by_user_, &job.spec->user}, {&waiting_by_team_, &job.spec->team}}) {
    int& n = (*counts)[*key];
    n += delta;
    if (n <= 0) counts->erase(*key);
  }
}

const TeamPolicy& ControllerState::TeamOf(const std::string& team) const {
  static const TeamPolicy kDefaults;
  return users_ ? users_->Team(team) : kDefaults;
}

Status ControllerState::CheckSubmitter(const Actor& who, JobSpec& spec) const {
  bool team_given = !spec.team.empty();
  if (spec.user.empty() || spec.user == who.user) {
    spec.user = who.user;
    if (!team_given) spec.team = who.team;
  } else {
    if (who.role != Role::kTeamAdmin && !who.admin()) {
      return Status::Denied("user", "only team admins and admins submit for other users");
    }
    const Actor* target = users_ ? users_->FindUser(spec.user) : nullptr;
    if (!target && !who.admin()) {
      return Status::Denied("user", fmt::format("no user '{}' in users.yaml", spec.user));
    }
    if (target && who.role == Role::kTeamAdmin && target->team != who.team) {
      return Status::Denied("user", fmt::format("{} is not a member of team {}", spec.user, who.team));
    }
    if (target && team_given && spec.team != target->team) {
      return Status::Invalid("team",
                             fmt::format("{} is a member of team {}, not {}", spec.user, target->team, spec.team));
    }
    if (!team_given) spec.team = target ? target->team : who.team;
  }
  if (!who.admin() && !who.MemberOf(spec.team)) {
    if (!who.other_teams.empty()) {
      return Status::Denied("team", fmt::format("you are not a member of team {}: you may submit for {}, {}", spec.team,
                                                who.team, fmt::join(who.other_teams, ", ")));
    }
    return Status::Denied("team", fmt::format("you may submit only for team {}", who.team));
  }
  return Status::Ok();
}

Status ControllerState::CheckTeamPermissions(const Actor& who, const JobSpec& spec) const {
  if (who.admin()) return Status::Ok();
  const TeamPolicy& policy = TeamOf(spec.team);
  const SchedulerConfig& config = options_.config.scheduler;
  std::vector<std::string> allowed = policy.priorities;
  if (allowed.empty()) {
    int default_rank = config.priority_classes[config.FindClass(config.default_priority_class)].rank;
    for (const PriorityClass& c : config.priority_classes) {
      if (c.rank <= default_rank) allowed.push_back(c.name);
    }
  }
  if (std::find(allowed.begin(), allowed.end(), spec.priority_class) == allowed.end()) {
    return Status::Denied("priority",
                          fmt::format("team {} may use priority classes {} (users.yaml teams.{}.priorities)", spec.team,
                                      fmt::join(allowed, ", "), spec.team));
  }
  if (!spec.preemptible && !policy.non_preemptible) {
    return Status::Denied("preemptible", fmt::format("team {} may not submit non-preemptible jobs "
                                                     "(users.yaml teams.{}.non_preemptible)",
                                                     spec.team, spec.team));
  }
  return Status::Ok();
}

Expected<JobsChanged> ControllerState::Cancel(const Actor& who, const std::string& id) {
  const std::string action = ActionWords(StateAction::kCancel, id);
  auto found = JobToChange(who, action, id);
  if (!found) return found.status();
  JobRecord* job = *found;
  std::vector<JobRecord*> tasks = WholeArray(id);  // "12" of an array: every task; "12_[4-5]": those
  const bool several = !tasks.empty();
  if (tasks.empty()) tasks.push_back(job);
  size_t changed = 0;
  for (const JobRecord* t : tasks) changed += !IsTerminal(t->state);
  // The queued tasks leave the queue in one pass (an array's thousands of tasks).
  std::set<std::string> dequeued;
  for (JobRecord* t : tasks) {
    if (PlaceOf(*t) == JobPlace::kQueued) dequeued.insert(t->spec->id);
  }
  RemovePending(dequeued);
  std::string why = "cancelled by " + who.user;
  for (JobRecord* t : tasks) CancelOne(*t, why, dequeued.count(t->spec->id) > 0);
  Audit(who, action, id, "ok", tasks.size() > 1 ? fmt::format("array of {} tasks", tasks.size()) : "");
  dirty_ = true;
  return several ? Changed(*job, id, tasks, changed) : JobsChanged::One(job->spec->id, id);
}

void ControllerState::CancelOne(JobRecord& job, const std::string& why, bool dequeued) {
  if (job.state == JobState::kPending) {
    Finish(job, JobState::kCancelled, why, dequeued);
  } else if (job.state == JobState::kRunning) {
    StopRunning(job, StopCause::kCancel, why, options_.kill_wait_ms);
  } else if (job.state == JobState::kStopping) {
    job.stop_cause = StopCause::kCancel;  // was being preempted: do not requeue it
    job.reason = why;
    Dirty(job);
  }
}

void ControllerState::StartJob(const StartDecision& s, size_t running_index) {
  JobRecord& job = *Find(s.job_id);
  TimeMs now = now_;
  // ApplyPlan moved its queue entry to snap_.running[running_index].
  MoveJob(job, {.state = JobState::kRunning,
                .place = JobPlace::kRunning,
                .dequeued = true,
                .running_index = static_cast<int>(running_index)});
  gates_dirty_ = true;  // jobs waiting for it to start (after:) may go
  job.start_ms = now;
  job.runs++;
  job.exit_code = -1;
  job.reason.clear();
  job.last_exit_ms = -1;
  if (job.first_start_ms < 0) {
    job.first_start_ms = now;
    if (job.submit_steady_us >= 0) {
      int64_t us = steady_us_ - job.submit_steady_us;
      submit_to_start_seconds_.Observe(static_cast<double>(us) / 1e6);
    }
  }
  Event(job, "started",
        {{"run", job.runs}, {"placement", PlacementToJson(s.placement, snap_.nodes, options_.config.catalog)}}, now);
  OpenLedger(job, s.placement);
  LendPorts(job, s.placement);
  counters_["started"]++;
  for (const NodeShare& ns : s.placement.nodes) SendStart(job, ns.node);
  NotifyJob(job, "start");
}

void ControllerState::SendStart(const JobRecord& job, int node_index) {
  const GpuCatalog& catalog = options_.config.catalog;
  const Node& node = snap_.nodes[node_index];
  const Placement& placement = RunningOf(job.spec->id).placement;
  StartOrder order;
  order.job_id = job.spec->id;
  order.run = job.runs;
  order.spec = job.spec;
  order.node_id = node.id;
  order.num_nodes = static_cast<int>(placement.nodes.size());
  order.leader_node = snap_.nodes[placement.nodes.front().node].id;
  order.master_addr = snap_.nodes[placement.nodes.front().node].address();
  order.node_address = node.address();
  for (const JobPort& p : job.ports) {
    if (p.name == "master") order.master_port = p.port;
    if (p.name != "master" && p.node == node_index) order.ports[p.name] = p.port;
  }
  order.sharing = HeldSharing(*job.spec, placement);
  for (size_t rank = 0; rank < placement.nodes.size(); ++rank) {
    const NodeShare& ns = placement.nodes[rank];
    if (ns.node != node_index) continue;
    order.node_rank = static_cast<int>(rank);
    order.cpus = ns.cpus;
    order.memory_mib = ns.memory_mib;
    for (const GpuShare& g : ns.gpus) {
      AssignedGpu a{g.gpu, node.gpus[g.gpu].uuid, "", g.milli, g.mps_thread_percent, g.memory_mib, "", g.mig_start};
      if (g.mig_profile >= 0) {
        a.mig_profile = catalog.Get(node.gpu_type()).mig_profiles[g.mig_profile].name;
        for (const MigInstance& m : node.gpus[g.gpu].mig_instances) {
          if (m.placement.profile == g.mig_profile && m.placement.start == g.mig_start) a.mig_uuid = m.uuid;
        }
      }
      order.gpus.push_back(std::move(a));
    }
  }
  if (auto it = mig_orders_.find(job.spec->id); it != mig_orders_.end()) {
    for (const auto& [n, m] : it->second) {
      if (n == node_index) order.mig.push_back(m);
    }
  }
  const TeamPolicy& policy = TeamOf(job.spec->team);
  order.unix_account = policy.unix_account;
  order.allow_root = policy.allow_root;
  SendAfterCommit(node_index, std::move(order));
}

std::set<std::string> ControllerState::NodeIdsOf(const Placement& placement) const {
  std::set<std::string> ids;
  for (const NodeShare& ns : placement.nodes) ids.insert(snap_.nodes[ns.node].id);
  return ids;
}

void ControllerState::LendPorts(JobRecord& job, const Placement& placement) {
  ReturnPorts(job);
  auto lend = [&](const std::string& name, int node) {
    // A range with no port left gives -1: the agent fails the start saying so.
    job.ports.push_back({name, node, ports_.Take(snap_.nodes[node])});
  };
  lend("master", placement.nodes.front().node);
  for (const NodeShare& ns : placement.nodes) {
    for (const std::string& name : job.spec->ports) lend(name, ns.node);
  }
}

void ControllerState::ReturnPorts(JobRecord& job) {
  for (const JobPort& p : job.ports) ports_.Release(snap_.nodes[p.node].id, p.port);
  job.ports.clear();
}

void ControllerState::StopRunning(JobRecord& job, StopCause cause, const std::string& reason, DurationMs grace_ms) {
  const std::string& id = job.spec->id;
  MoveJob(job, {.state = JobState::kStopping, .place = JobPlace::kRunning});
  job.stop_cause = cause;
  job.reason = reason;
  RunningJob& entry = RunningOf(id);
  entry.stop_at_ms = now_ + grace_ms;
  Event(job, "stopping", {{"cause", ToString(cause)}, {"reason", reason}, {"grace_ms", grace_ms}});
  const std::set<std::string>& left = running_nodes_[id];
  for (const NodeShare& ns : entry.placement.nodes) {
    // Not to a gang member that has exited already: it would answer "not running" once more.
    if (left.count(snap_.nodes[ns.node].id)) {
      SendAfterCommit(ns.node, StopOrder{id, job.runs, snap_.nodes[ns.node].id, grace_ms, reason, ""});
    }
  }
}

void ControllerState::DoExited(const std::string& named_id, int run, const std::string& node_id, int exit_code,
                               const std::string& reason, TimeMs ended_ms) {
  JobRecord* job = Find(named_id);
  if (!job || job->runs != run || (job->state != JobState::kRunning && job->state != JobState::kStopping)) return;
  // The indexes are keyed by the stored id, whatever spelling the report used ("01", "1_00").
  const std::string job_id = job->spec->id;
  // Each node's part ends once: a second report (an answer to a stop that came after the
  // part had exited) neither ends the gang early nor replaces its reason.
  std::set<std::string>& left = running_nodes_[job_id];
  if (left.erase(node_id) == 0) return;
  // The agent's exit time (an exit while the server was down ends the interval then, not at
  // the reconnect); never before the start or after now.
  TimeMs now = now_;
  ended_ms = ended_ms < 0 ? now : std::clamp(ended_ms, job->start_ms, now);
  job->last_exit_ms = std::max(job->last_exit_ms, ended_ms);
  Event(*job, "exited", {{"run", run}, {"node", node_id}, {"exit_code", exit_code}, {"reason", reason}}, ended_ms);
  if (exit_code != 0 && job->exit_code <= 0) job->exit_code = exit_code;
  if (exit_code == 0 && job->exit_code < 0) job->exit_code = 0;
  if (!reason.empty() && job->stop_cause == StopCause::kNone && exit_code != 0) job->reason = reason;
  dirty_ = true;
  Dirty(*job);
  if (!left.empty()) {
    // One process of a gang failed: the others cannot go on alone.
    if (exit_code != 0 && job->state == JobState::kRunning) {
      StopRunning(
          *job, StopCause::kNone,
          fmt::format("a gang member on {} exited with {}{}", node_id, exit_code, reason.empty() ? "" : ": " + reason),
          options_.kill_wait_ms);
    }
    return;
  }
  const RunningJob& r = RunningOf(job_id);
  job->attained_gpu_ms +=
      static_cast<double>(now_ - r.start_ms) * PlacementShare(r.placement, job->spec->request.sharing);
  CloseLedger(*job, job->last_exit_ms);
  // Requeue or Finish takes the job out of its running entry (MoveJob).
  switch (job->stop_cause) {
    case StopCause::kPreempt:
    case StopCause::kReclaim:
      job->evictions++;
      Requeue(*job, job->stop_cause == StopCause::kPreempt ? "preempted" : "its node was reclaimed");
      NotifyJob(*job, "preempt");
      return;
    case StopCause::kCancel: Finish(*job, JobState::kCancelled, job->reason); return;
    case StopCause::kTimeLimit:
    case StopCause::kCostLimit:
    case StopCause::kIdle:
    case StopCause::kGpuMemory: Finish(*job, JobState::kFailed, job->reason); return;
    case StopCause::kNodeFault:
      if (job->fault_retries < job->spec->max_retries) {
        job->fault_retries++;
        Requeue(*job, "requeued after a fault");
      } else {
        Finish(*job, JobState::kFailed, job->reason + " (retries exhausted)");
      }
      return;
    case StopCause::kNone: break;
  }
  if (job->exit_code == 0) {
    Finish(*job, JobState::kSucceeded, "");
  } else if (job->failure_retries < job->spec->retries_on_failure) {
    job->failure_retries++;
    Requeue(*job, fmt::format("retry after exit code {}", job->exit_code));
  } else {
    Finish(*job, JobState::kFailed, job->reason.empty() ? fmt::format("exit code {}", job->exit_code) : job->reason);
  }
}

void ControllerState::Requeue(JobRecord& job, const std::string& event) {
  if (!job.spec->kube_pods.empty()) {
    // A pod stopped is a pod deleted: it does not come back. Its owner (a Job, a JobSet)
    // makes a new one, which queues as a new job.
    Finish(job, JobState::kCancelled, event + ": its pod was deleted");
    return;
  }
  MoveJob(job, {.state = JobState::kPending, .place = JobPlace::kQueued});
  job.stop_cause = StopCause::kNone;
  Event(job, "requeued", {{"why", event}});
  counters_["requeued"]++;
}

void ControllerState::Finish(JobRecord& job, JobState state, const std::string& reason, bool dequeued) {
  MoveJob(job, {.state = state, .place = JobPlace::kEnded, .dequeued = dequeued});
  job.end_ms = now_;
  job.reason = reason;
  job.stop_cause = StopCause::kNone;
  job.hold.clear();
  gates_dirty_ = true;
  Event(job, ToString(state), {{"reason", reason}, {"exit_code", job.exit_code}});
  counters_[std::string("finished_") + ToString(state)]++;
  predictions_.Learn(job);
  NotifyJob(job, state == JobState::kFailed ? "fail" : "end");
  if (!job.spec->kube_pods.empty()) PodJobEnded(job);
}

void ControllerState::RemoveRunning(const std::string& id) {
  // The job's use up to now counts before it leaves the rates (the next cycle's advance
  // would see the running jobs without it, as if it had stopped at the last cycle).
  if (ledger_.last_advanced() < now_) AdvanceFairShare();
  size_t pos = static_cast<size_t>(running_pos_.at(id));
  std::vector<int> nodes;
  for (const NodeShare& ns : snap_.running[pos].placement.nodes) nodes.push_back(ns.node);
  if (pos + 1 != snap_.running.size()) {
    snap_.running[pos] = std::move(snap_.running.back());
    running_pos_[snap_.running[pos].spec->id] = static_cast<int>(pos);
  }
  snap_.running.pop_back();
  running_pos_.erase(id);
  running_nodes_.erase(id);
  mig_orders_.erase(id);
  if (JobRecord* job = Find(id)) ReturnPorts(*job);
  // A draining node with nothing left on it is drained.
  for (int n : nodes) {
    if (snap_.nodes[n].state != NodeState::kDraining) continue;
    bool busy = false;
    for (const RunningJob& r : snap_.running) {
      for (const NodeShare& ns : r.placement.nodes) busy = busy || ns.node == n;
    }
    if (!busy) {
      snap_.nodes[n].state = NodeState::kDrained;
      PersistNode(n);
    }
  }
}

void ControllerState::AdvanceFairShare() {
  std::map<std::string, double> rates;
  bool priced = options_.config.scheduler.fairshare_price_weighted;
  for (const RunningJob& r : snap_.running) {
    rates[r.spec->team] += UsageRate(r, snap_, options_.config.catalog, priced);
  }
  ledger_.Advance(now_, rates);
  if (options_.config.scheduler.fairshare_weight != 0) snap_.team_usage = ledger_.usage();
}

void ControllerState::Cycle() {
  dirty_ = false;
  snap_.now_ms = now_;
  AdmitKeptOut();
  AdvanceFairShare();
  UpdateTeamClocks();
  OrderPending();
  ReleaseMpsHolds();
  Plan plan = engine_->Schedule(snap_, {.explain = false, .pending_in_order = true});
  for (const Preemption& p : plan.preemptions) {
    JobRecord& victim = *Find(p.job_id);
    if (victim.state != JobState::kRunning) continue;
    StopRunning(victim, StopCause::kPreempt, fmt::format("preempted ({}) for job {}", p.reason, p.for_job),
                std::max<DurationMs>(0, p.stop_at_ms - snap_.now_ms));
    counters_["preempted"]++;
    Dirty(*Find(p.for_job));  // its stored document says it is nominated (Nominate, below)
  }
  for (const MigChange& c : plan.mig_changes) {
    PersistNode(c.node);
    const Node& node = snap_.nodes[c.node];
    const GpuType& type = options_.config.catalog.Get(node.gpu_type());
    auto specs = [&](const std::vector<MigPlacement>& list) {
      std::vector<MigInstanceSpec> out;
      for (const MigPlacement& p : list) out.push_back({type.mig_profiles[p.profile].name, p.start});
      return out;
    };
    mig_orders_[c.for_job].emplace_back(c.node,
                                        MigOrder{c.gpu, node.gpus[c.gpu].uuid, specs(c.destroy), specs(c.create)});
  }
  size_t first_new = snap_.running.size();
  ApplyPlan(plan, snap_, &queue_);
  for (const Preemption& p : plan.preemptions) queue_.Nominate(snap_.pending, p.for_job);
  for (size_t k = 0; k < plan.starts.size(); ++k) StartJob(plan.starts[k], first_new + k);
  // The starts may have stopped a team's clocks: NextClockThreshold then says so at once
  // (the next tick's cycle would stop them a second later anyway).
  if (!plan.starts.empty()) UpdateTeamClocks();
}

void ControllerState::Tick() {
  TimeMs now = now_;
  for (size_t n = 0; n < snap_.nodes.size(); ++n) {
    const int node = static_cast<int>(n);
    NodeLink* link = nodes_.Link(node);
    if (link && link->remote() && now - nodes_.LastHeard(node) > options_.node_timeout_ms) NodeLost(node);
  }
  for (auto& [id, pos] : running_pos_) {
    JobRecord& job = *Find(id);
    if (job.state == JobState::kRunning && now >= job.start_ms + job.spec->time_limit_ms) {
      StopRunning(job, StopCause::kTimeLimit,
                  fmt::format("time limit {} reached", FormatDuration(job.spec->time_limit_ms)), options_.kill_wait_ms);
    }
  }
  AccountingTick();
  SampleHistory();
  RefreshPredictions();
  if (autoscaling_.Due(now)) Autoscale();
  if (!pod_jobs_.empty() || !refused_pods_.empty()) {
    if (now - last_pod_retry_ms_ >= 10 * kSecondMs) {
      last_pod_retry_ms_ = now;
      RetryRefusedPods();             // a team under its limits again, a quota changed
      EndPodRunsPastTheirDeletion();  // a pod kept by a finalizer past its grace
    }
  }
  dirty_ = true;  // ages and fair share move with time
}

}  // namespace gantry
