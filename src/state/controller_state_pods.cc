// Kubernetes pods as jobs (ControllerState::ApplyKubePod): a pod that asks for Gantry is
// queued, placed, preempted and billed like a bare job; a gang's pods are one job of one
// member per node. The pod link binds and deletes pods; the watch says what became of them.
// Nodes known only from their Node objects (no agent) take pods only.
#include <fmt/format.h>

#include <algorithm>

#include "core/time.h"
#include "state/controller_state.h"

namespace gantry {

namespace {

// How long a pod may wait before it is told why (its PodScheduled condition).
constexpr DurationMs kWaitUntold = 2 * kSecondMs;
// How long after a deleted pod's grace period its node's kubelet surely stopped it.
constexpr DurationMs kKubeletSlack = 30 * kSecondMs;

// Takes the pod `key` out of every waiting gang (a gang left empty goes).
void LeaveGangs(std::map<std::string, std::map<std::string, KubePodJob>>& gangs, const std::string& key) {
  for (auto it = gangs.begin(); it != gangs.end();) {
    it->second.erase(key);
    it = it->second.empty() ? gangs.erase(it) : std::next(it);
  }
}

// The pod's own field for a job field Gantry's checks name, so that a refusal points at
// what the pod's author wrote; a field the pod's reader names already (or none) as it is.
std::string PodFieldOf(const std::string& job_field) {
  static const std::map<std::string, std::string> fields = {
      {"gpus", "spec.containers[].resources.limits[nvidia.com/gpu]"},
      {"mig_profile", "spec.containers[].resources.limits[nvidia.com/mig-<profile>]"},
      {"gpu_fraction", "metadata.annotations[gantry.io/gpu-fraction]"},
      {"sharing", "metadata.annotations[gantry.io/gpu-sharing]"},
      {"gpu_memory_gb", "metadata.annotations[gantry.io/gpu-memory]"},
      {"gpu_types", "spec.nodeSelector[nvidia.com/gpu.product]"},
      {"cpus", "spec.containers[].resources.requests[cpu]"},
      {"memory_gb", "spec.containers[].resources.requests[memory]"},
      {"memory_mib", "spec.containers[].resources.requests[memory]"},
      {"time_limit", "spec.activeDeadlineSeconds"},
      {"estimated_duration", "metadata.annotations[gantry.io/estimated-duration]"},
      {"priority", "spec.priorityClassName"},
      {"preemptible", "metadata.annotations[gantry.io/preemptible]"},
      {"user", "metadata.annotations[gantry.io/user]"},
      {"team", "metadata.namespace"},
      {"name", "metadata.name"},
      {"gang", "metadata.labels[gantry.io/gang]"}};
  auto it = fields.find(job_field);
  return it == fields.end() ? job_field : it->second;
}

}  // namespace

void ControllerState::IndexPodJobs() {
  for (const auto& [seq, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    for (size_t i = 0; i < job.spec->kube_pods.size(); ++i) {
      PodRefParts p = SplitPodRef(job.spec->kube_pods[i]);
      PodTrack& track = pod_jobs_[p.key()];
      track.job_id = job.spec->id;
      track.member = static_cast<int>(i);
      track.pod.ns = p.ns;
      track.pod.name = p.name;
      track.pod.uid = p.uid;
    }
  }
}

void ControllerState::ApplyKubePod(const WatchedPod& w, bool listed) {
  if (w.deleted) {
    PodGone(w.key, "its pod was deleted");
    return;
  }
  auto tracked = pod_jobs_.find(w.key);
  if (tracked != pod_jobs_.end() && tracked->second.pod.uid != w.uid) {
    PodGone(w.key, "its pod was replaced by another of the same name");  // missed the deletion
    tracked = pod_jobs_.end();
  }
  if (!w.job.ok()) {
    // A pod of a job already placed cannot turn unreadable (a pod's spec is immutable).
    if (tracked == pod_jobs_.end()) {
      pod_refusals_[w.key] = {
          w.ns, w.name, w.uid, "refused",
          fmt::format("Gantry cannot run this pod: {}: {}", w.job.status().field(), w.job.status().message())};
    }
    return;
  }
  const KubePodJob& pod = *w.job;
  if (tracked != pod_jobs_.end()) {
    PodChanged(tracked->second, pod, listed);
    return;
  }
  pod_refusals_.erase(w.key);
  refused_pods_.erase(w.key);
  // A pod waiting in a gang that changed its labels waits in its new gang only (or none):
  // one pod is never a member of two gangs, nor of a gang and a job of its own.
  LeaveGangs(gangs_waiting_, w.key);
  // A pod Gantry did not place (bound by its nodeName, or ended) is not queued: the kubelet has it.
  if (pod.Ended() || pod.deleting || !pod.node.empty()) return;
  PodArrived(pod);
}

void ControllerState::PodArrived(const KubePodJob& pod) {
  if (!pod.gang.empty()) {
    const std::string gang = pod.ns + "/" + pod.gang;
    gangs_waiting_[gang][pod.key()] = pod;
    FormGang(gang);
    return;
  }
  CreatePodJob({pod});
}

void ControllerState::RetryRefusedPods() {
  std::map<std::string, KubePodJob> refused;
  refused.swap(refused_pods_);
  for (const auto& [key, pod] : refused) {
    pod_refusals_.erase(key);
    PodArrived(pod);
  }
}

void ControllerState::ApplyKubePods(const std::vector<WatchedPod>& pods) {
  std::set<std::string> listed;
  for (const WatchedPod& w : pods) {
    listed.insert(w.key);
    ApplyKubePod(w, true);
  }
  std::vector<std::string> gone;
  for (const auto& [key, track] : pod_jobs_) {
    if (!listed.count(key)) gone.push_back(key);
  }
  for (const auto& [gang, members] : gangs_waiting_) {
    for (const auto& [key, pod] : members) {
      if (!listed.count(key)) gone.push_back(key);
    }
  }
  for (auto it = pod_refusals_.begin(); it != pod_refusals_.end();) {
    if (!listed.count(it->first)) refused_pods_.erase(it->first);
    it = listed.count(it->first) ? std::next(it) : pod_refusals_.erase(it);
  }
  for (const std::string& key : gone) PodGone(key, "its pod was deleted");
}

void ControllerState::PodChanged(PodTrack& track, const KubePodJob& pod, bool listed) {
  const bool was_running = track.pod.phase == "Running";
  track.pod = pod;
  JobRecord* job = Find(track.job_id);
  if (!job || IsTerminal(job->state)) return;
  const bool placed = job->state == JobState::kRunning || job->state == JobState::kStopping;
  if (!placed) return;
  const Placement& placement = RunningOf(job->spec->id).placement;
  if (track.member >= static_cast<int>(placement.nodes.size())) return;
  const int node = placement.nodes[track.member].node;
  const std::string& node_id = snap_.nodes[node].id;
  if (pod.phase == "Running" && !was_running) Event(*job, "running", {{"run", job->runs}, {"pod", pod.key()}});
  if (pod.Ended()) {
    DoExited(job->spec->id, job->runs, node_id, pod.phase == "Succeeded" ? 0 : pod.exit_code,
             pod.phase == "Succeeded"
                 ? ""
                 : fmt::format("the pod failed{}", pod.ended_reason.empty() ? "" : ": " + pod.ended_reason));
    return;
  }
  // Being deleted, and the kubelet stopped every container: its GPUs are free, whatever the
  // phase says (kubelets before 1.27 leave a deleted pod Running) or a finalizer keeps.
  if (pod.deleting && pod.containers_ended) {
    EndPodRun(track, *job, "its pod was deleted and its containers stopped");
    return;
  }
  // Placed and durable, yet not bound: the bind was lost (a restart between the commit and
  // the call). It goes to the same node again; the API server binds a pod once.
  if (listed && pod.node.empty() && !pod.deleting && job->state == JobState::kRunning) {
    Event(*job, "bind_again", {{"pod", pod.key()}, {"node", node_id}});
    SendStart(*job, node);
  }
  // Stopping and durable, yet the pod lives on and no deletion began: the stop was lost (a
  // restart before its call, or while its eviction waited for a PodDisruptionBudget).
  if (listed && !pod.deleting && job->state == JobState::kStopping) {
    Event(*job, "stop_again", {{"pod", pod.key()}, {"node", node_id}});
    const DurationMs grace_ms = std::max<DurationMs>(0, RunningOf(job->spec->id).stop_at_ms - now_);
    SendAfterCommit(node, StopOrder{job->spec->id, job->runs, node_id, grace_ms, job->reason, ""});
  }
}

void ControllerState::PodGone(const std::string& key, const std::string& why) {
  pod_refusals_.erase(key);
  refused_pods_.erase(key);
  LeaveGangs(gangs_waiting_, key);
  auto tracked = pod_jobs_.find(key);
  if (tracked == pod_jobs_.end()) return;
  PodTrack track = std::move(tracked->second);
  pod_jobs_.erase(tracked);
  JobRecord* job = Find(track.job_id);
  if (!job || IsTerminal(job->state)) return;
  dirty_ = true;
  if (job->state == JobState::kPending) {
    // A gang waits whole: its other members wait again, for a new member in its place.
    std::string gang;
    for (auto it = pod_jobs_.begin(); it != pod_jobs_.end();) {
      if (it->second.job_id != job->spec->id) {
        ++it;
        continue;
      }
      gang = it->second.pod.ns + "/" + it->second.pod.gang;
      gangs_waiting_[gang][it->first] = it->second.pod;
      it = pod_jobs_.erase(it);
    }
    Finish(*job, JobState::kCancelled, why);
    if (!gang.empty()) FormGang(gang);
    return;
  }
  EndPodRun(track, *job, why);
}

void ControllerState::EndPodRun(const PodTrack& track, JobRecord& job, const std::string& why) {
  const Placement& placement = RunningOf(job.spec->id).placement;
  if (track.member >= static_cast<int>(placement.nodes.size())) return;
  const std::string node_id = snap_.nodes[placement.nodes[track.member].node].id;
  const bool asked = job.state == JobState::kStopping;
  DoExited(job.spec->id, job.runs, node_id, asked ? 0 : 137, asked ? "" : why);
}

void ControllerState::EndPodRunsPastTheirDeletion() {
  std::vector<std::string> over;
  for (const auto& [key, track] : pod_jobs_) {
    const KubePodJob& pod = track.pod;
    if (pod.deleting && pod.deletion_ms >= 0 && now_ > pod.deletion_ms + kKubeletSlack) over.push_back(key);
  }
  for (const std::string& key : over) {
    auto tracked = pod_jobs_.find(key);
    PodTrack& track = tracked->second;
    const DurationMs late_ms = now_ - track.pod.deletion_ms;
    track.pod.deletion_ms = -1;  // once
    JobRecord* job = Find(track.job_id);
    if (!job || (job->state != JobState::kRunning && job->state != JobState::kStopping)) continue;
    Event(*job, "pod_kept", {{"pod", key}, {"past_grace_ms", late_ms}});
    EndPodRun(track, *job,
              fmt::format("its pod's grace period ended {}s ago and the pod is still there (a finalizer holds it?); "
                          "its containers were stopped by then",
                          late_ms / 1000));
  }
}

void ControllerState::FormGang(const std::string& gang_key) {
  auto it = gangs_waiting_.find(gang_key);
  if (it == gangs_waiting_.end()) return;
  std::vector<KubePodJob> members;
  for (const auto& [key, pod] : it->second) members.push_back(pod);
  int want = 0;
  for (const KubePodJob& m : members) want = std::max(want, m.gang_min_members);
  if (want == 0 || static_cast<int>(members.size()) < want) return;  // KubePodWaits says why
  members.resize(want);  // by name; a member beyond the count waits for the next gang
  for (const KubePodJob& m : members) it->second.erase(m.key());
  if (it->second.empty()) gangs_waiting_.erase(it);
  CreatePodJob(members);
}

void ControllerState::RefusePods(const std::vector<KubePodJob>& members, const Status& why) {
  for (const KubePodJob& m : members) {
    refused_pods_[m.key()] = m;  // tried again when a node comes
    pod_refusals_[m.key()] = {m.ns, m.name, m.uid, "refused",
                              fmt::format("Gantry cannot run this pod: {}{}",
                                          why.field().empty() ? "" : PodFieldOf(why.field()) + ": ", why.message())};
  }
}

void ControllerState::CreatePodJob(const std::vector<KubePodJob>& members) {
  auto gang = JobOfGang(members);
  if (!gang) {
    RefusePods(members, gang.status());
    return;
  }
  JobSpec spec = std::move(*gang);
  // A user named by gantry.io/user is a users.yaml member of the pod's team, or a name of the
  // pod's own namespace (NAME@NAMESPACE, as its service accounts are): never another team's
  // user, whose limits a pod would fill.
  const std::string own_suffix = "@" + members.front().ns;
  const Actor* member = users_ ? users_->FindUser(spec.user) : nullptr;
  const bool own_form = spec.user.size() > own_suffix.size() &&
                        spec.user.compare(spec.user.size() - own_suffix.size(), std::string::npos, own_suffix) == 0;
  if (member ? member->team != spec.team : !own_form) {
    RefusePods(members, Status::Denied("metadata.annotations[gantry.io/user]",
                                       fmt::format("'{}' is not a member of team {} (users.yaml), nor a name of "
                                                   "namespace {} (NAME{})",
                                                   spec.user, spec.team, members.front().ns, own_suffix)));
    return;
  }
  spec.tolerations.push_back({kKubePodsOnlyTaint, ""});
  spec.max_retries = 0;  // a pod is not restarted elsewhere: its owner makes a new one
  Actor who;
  who.user = spec.user;
  who.team = spec.team;
  Status s = ValidateJobSpec(spec, options_.config.catalog, options_.config.scheduler);
  if (s.ok()) s = CheckTeamPermissions(who, spec);
  if (s.ok()) s = CheckAdmissibleNow(spec);
  if (s.ok()) s = CheckQuotaAdmissible(spec, *quotas_, options_.config.catalog);
  if (s.ok()) s = CheckSubmitLimits({spec});  // a flood of pods fills no memory but the API server's
  if (!s.ok()) {
    RefusePods(members, s);
    return;
  }
  JobRecord& job = AddJob(who, std::move(spec));
  for (size_t i = 0; i < members.size(); ++i) {
    pod_refusals_.erase(members[i].key());
    pod_jobs_[members[i].key()] = {job.spec->id, static_cast<int>(i), members[i]};
  }
}

void ControllerState::PodJobEnded(const JobRecord& job) {
  for (const std::string& ref : job.spec->kube_pods) {
    const std::string key = SplitPodRef(ref).key();
    auto tracked = pod_jobs_.find(key);
    if (tracked == pod_jobs_.end() || tracked->second.job_id != job.spec->id) continue;
    const KubePodJob& pod = tracked->second.pod;
    // One that ended or is being deleted already needs nothing; one still waiting or running
    // (a job cancelled in Gantry) is deleted, so no pod waits for a job that is gone.
    if (!pod.Ended() && !pod.deleting && pod_link_) {
      StopOrder stop{job.spec->id, job.runs, pod.node, 0, job.reason.empty() ? "its Gantry job ended" : job.reason,
                     ref};
      effects_.orders.push_back({pod_link_, stop});
    }
    pod_jobs_.erase(tracked);
  }
}

std::string ControllerState::PodOfMember(const JobRecord& job, int node_index) {
  auto pos = running_pos_.find(job.spec->id);
  if (pos == running_pos_.end()) return "";
  const Placement& placement = snap_.running[pos->second].placement;
  for (size_t rank = 0; rank < placement.nodes.size() && rank < job.spec->kube_pods.size(); ++rank) {
    if (placement.nodes[rank].node == node_index) return job.spec->kube_pods[rank];
  }
  return "";
}

std::vector<KubePodWait> ControllerState::KubePodWaits() {
  std::vector<KubePodWait> out;
  auto add = [&](const JobRecord& job, const std::string& code, const std::string& message) {
    for (const std::string& ref : job.spec->kube_pods) {
      PodRefParts p = SplitPodRef(ref);
      out.push_back({p.ns, p.name, p.uid, code, message});
    }
  };
  if (!pod_jobs_.empty()) {
    const Plan& plan = ExplainedPlan();
    for (const WaitingJob& w : plan.waiting) {
      const JobRecord* job = Find(w.job_id);
      // A pod placed within moments of its arrival is never told it waits (one cycle of a
      // burst of pods would otherwise cost each a status write).
      if (!job || job->spec->kube_pods.empty() || now_ - job->submit_ms < kWaitUntold) continue;
      std::string message = fmt::format("Gantry job {}: {}", job->spec->id, plan.reason(w));
      if (std::string pool = autoscaling_.WaitReason(job->spec->id, now_); !pool.empty()) message += "; " + pool;
      if (w.estimated_start_ms != kNever) {
        // To the minute: the condition changes when the estimate does, not each cycle.
        message += fmt::format("; estimated start {}", FormatUtc(w.estimated_start_ms / kMinuteMs * kMinuteMs));
      }
      add(*job, ToString(w.code), message);
    }
    JobGates gates(JobTable());
    for (uint64_t seq : kept_out_) {
      const JobRecord& job = jobs_.at(seq);
      if (job.spec->kube_pods.empty()) continue;
      GateBlocker b = gates.WhyKeptOut(job);
      if (!b.code.empty()) add(job, b.code, fmt::format("Gantry job {}: {}", job.spec->id, b.reason));
    }
  }
  for (const auto& [gang, members] : gangs_waiting_) {
    int want = 0;
    for (const auto& [key, pod] : members) want = std::max(want, pod.gang_min_members);
    std::string message = want == 0
                              ? fmt::format(
                                    "gang {}: no member count (annotation gantry.io/gang-min-members); Gantry places a "
                                    "gang whole once all its members exist",
                                    gang)
                              : fmt::format("gang {}: {} of {} members exist; Gantry places the gang whole once all do",
                                            gang, members.size(), want);
    for (const auto& [key, pod] : members) out.push_back({pod.ns, pod.name, pod.uid, "gang_incomplete", message});
  }
  for (const auto& [key, refusal] : pod_refusals_) out.push_back(refusal);
  return out;
}

void ControllerState::AddKubeOnlyNode(const std::string& id, const KubeNodeFacts& facts) {
  const GpuCatalog& catalog = options_.config.catalog;
  auto label = [&](const char* key) {
    auto it = facts.labels.find(key);
    return it == facts.labels.end() ? std::string() : it->second;
  };
  const GpuType* type = TypeOfProduct(catalog, label("gantry.io/gpu-type"));
  if (!type) type = TypeOfProduct(catalog, label("nvidia.com/gpu.product"));
  if (!IsNodeId(id) || !type) {
    log_(fmt::format("kubernetes: node {} is left out: {}", id,
                     !type ? fmt::format("its GPU model '{}' (label nvidia.com/gpu.product) is none of {}",
                                         label("nvidia.com/gpu.product"), catalog.Names())
                           : fmt::format("its name is not a Gantry node id ({})", kNodeIdRule)));
    return;
  }
  Node node;
  node.id = id;
  for (int g = 0; g < facts.gpus; ++g) {
    Gpu gpu;
    gpu.index = g;
    gpu.type = type->id;
    node.gpus.push_back(gpu);
  }
  node.cpus = facts.cpus;
  node.memory_mib = facts.memory_mib;
  node.taints.push_back({kKubePodsOnlyTaint, ""});
  node.containers = false;
  node.containers_problem = "a Kubernetes node without a Gantry agent: it runs pods only";
  if (Status s = ValidateNode(node, catalog); !s.ok()) {
    log_(fmt::format("kubernetes: node {} is left out: {}", id, s.ToString()));
    return;
  }
  AddNode(node, nullptr);
  RetryRefusedPods();  // a pod no node could hold may fit this one
}

}  // namespace gantry
