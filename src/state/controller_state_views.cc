// Views of the controller's state (jobs, queue, cluster, nodes, metrics) and the admin's
// node drains. The Controller calls them on its thread, so each sees one consistent state.
#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include "billing/report.h"
#include "sched/apply_plan.h"
#include "sched/plan_output.h"
#include "sched/usage.h"
#include "state/controller_state.h"
#include "state/node_json.h"

namespace gantry {

Answer ControllerState::GetJob(const Actor& who, const std::string& id) {
  JobRecord* job = Find(id);
  if (!job || !who.SeesTeam(job->spec->team)) return Status(StatusCode::kNotFound, "no job " + id, "id");
  nlohmann::json r = ApiView(*job, true);
  r["cost"] = RoundTo(accounting_.JobCost(*job, now_), 4);
  r["currency"] = options_.pricing.currency;
  if (job->idle_flagged) r["idle"] = true;
  if (nlohmann::json use = accounting_.JobUse(id); !use.empty()) r["gpu_use"] = std::move(use);
  // An array's own id ("12", which is also its first task's): what the array is.
  if (job->array_id == job->seq && id.find('_') == std::string::npos && arrays_.at(job->array_id).size() > 1) {
    r["array"] = ArraySummary(job->array_id);
  }
  return r;
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The entries [offset, offset + limit) of `all` (limit 0: to the end).
nlohmann::json Page(nlohmann::json all, int offset, int limit) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = static_cast<size_t>(offset);
       i < all.size() && (limit <= 0 || out.size() < static_cast<size_t>(limit)); ++i) {
    out.push_back(std::move(all[i]));
  }
  return out;
}

}  // namespace

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "pending,running", "active" (pending, running, stopping), Slurm's "PENDING,RUNNING" or
// "PD,R"; empty: every state.
Expected<std::set<JobState>> StatesOf(const std::string& text) {
  static const std::map<std::string, std::vector<JobState>> kWords = {
      {"active", {JobState::kPending, JobState::kRunning, JobState::kStopping}},
      {"pd", {JobState::kPending}},
      {"r", {JobState::kRunning}},
      {"cg", {JobState::kStopping}},
      {"completing", {JobState::kStopping}},
      {"cd", {JobState::kSucceeded}},
      {"completed", {JobState::kSucceeded}},
      {"f", {JobState::kFailed}},
      {"ca", {JobState::kCancelled}},
      {"canceled", {JobState::kCancelled}}};
  std::set<JobState> out;
  for (std::string word : SplitList(text)) {
    word = Lower(word);
    JobState one = JobState::kPending;
    if (auto it = kWords.find(word); it != kWords.end()) {
      out.insert(it->second.begin(), it->second.end());
    } else if (ParseJobState(word, &one)) {
      out.insert(one);
    } else {
      return Status::Invalid("state", "unknown state '" + word.substr(0, 40) +
                                          "' (pending, running, stopping, succeeded, failed, cancelled, active, or "
                                          "several joined by ',')");
    }
  }
  return out;
}

}  // namespace

Answer ControllerState::ListJobs(const Actor& who, const JobFilter& f) const {
  auto wanted = StatesOf(f.state);
  if (!wanted) return wanted.status();
  std::set<std::string> names;
  for (const std::string& name : SplitList(f.names)) names.insert(name);
  if (f.limit < 1 || f.limit > 10000) return Status::Invalid("limit", "must be within 1..10000");
  std::string search = Lower(f.search);
  nlohmann::json out = nlohmann::json::array();
  int matched = 0;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    const JobRecord& job = it->second;
    const JobSpec& s = *job.spec;
    if (!who.SeesTeam(s.team)) continue;
    if (!wanted->empty() && !wanted->count(job.state)) continue;
    if (!names.empty() && !names.count(s.name)) continue;
    if (!f.team.empty() && s.team != f.team) continue;
    if (!f.user.empty() && s.user != f.user) continue;
    if (f.since_ms >= 0 && job.end_ms >= 0 && job.end_ms < f.since_ms) continue;
    if (f.until_ms >= 0 && job.submit_ms > f.until_ms) continue;
    if (!search.empty() && s.id != f.search && Lower(s.name).find(search) == std::string::npos &&
        Lower(s.user).find(search) == std::string::npos) {
      continue;
    }
    if (matched++ < f.offset || static_cast<int>(out.size()) >= f.limit) continue;
    out.push_back(ApiView(job, false));
  }
  return nlohmann::json{{"jobs", out}, {"total", matched}, {"offset", f.offset}};
}

namespace {

void AddArrayIds(const JobRecord& job, nlohmann::json& e) {
  if (job.array_id == 0) return;
  e["array_job_id"] = std::to_string(job.array_id);
  e["array_task_id"] = job.array_task;
}

}  // namespace

const Plan& ControllerState::ExplainedPlan() {
  if (queue_cache_version_ != version_ || !queue_cache_) {
    snap_.now_ms = now_;
    MergeNewPending();  // the order the next cycle uses, unless it re-keys
    queue_cache_ = std::make_shared<Plan>(engine_->Schedule(snap_, {.explain = true, .pending_in_order = true}));
    queue_cache_version_ = version_;
  }
  return *queue_cache_;
}

Answer ControllerState::Queue(const Actor& who, const PageQuery& page) {
  const Plan& plan = ExplainedPlan();
  TimeMs now = now_;
  nlohmann::json out = nlohmann::json::array();
  int others = 0;
  for (const WaitingJob& w : plan.waiting) {
    const JobRecord* job = Find(w.job_id);
    if (!job) continue;
    const JobSpec& s = *job->spec;
    if (!page.team.empty() && s.team != page.team) continue;
    // A user sees their team's jobs; the others only as the gaps in the positions and a count.
    if (!who.SeesTeam(s.team)) {
      ++others;
      continue;
    }
    nlohmann::json e = {{"position", w.position},
                        {"id", s.id},
                        {"team", s.team},
                        {"user", s.user},
                        {"name", s.name},
                        {"priority", s.priority_class},
                        {"gpus", JobGpuShare(s.request, options_.config.catalog)},
                        {"sharing", ToString(s.request.sharing)},
                        {"waiting_s", (now - job->submit_ms) / 1000},
                        {"code", ToString(w.code)},
                        {"reason", plan.reason(w)}};
    if (std::string pool = autoscaling_.WaitReason(s.id, now); !pool.empty()) {
      e["reason"] = plan.reason(w) + "; " + pool;
    }
    if (w.estimated_start_ms != kNever) e["estimated_start"] = FormatUtc(w.estimated_start_ms);
    AddArrayIds(*job, e);
    out.push_back(std::move(e));
  }
  nlohmann::json starting = nlohmann::json::array();
  for (const StartDecision& s : plan.starts) {
    const JobRecord* job = Find(s.job_id);
    if (job && who.SeesTeam(job->spec->team)) starting.push_back(s.job_id);
  }
  // Held jobs, jobs waiting on a dependency and tasks over their array's limit are out of
  // the line until that changes.
  nlohmann::json blocked = nlohmann::json::array();
  JobGates gates(JobTable());
  for (uint64_t seq : kept_out_) {
    const JobRecord& job = jobs_.at(seq);
    if (!who.SeesTeam(job.spec->team) || (!page.team.empty() && job.spec->team != page.team)) continue;
    GateBlocker b = gates.WhyKeptOut(job);
    nlohmann::json e = {{"id", job.spec->id},
                        {"team", job.spec->team},
                        {"user", job.spec->user},
                        {"name", job.spec->name},
                        {"priority", job.spec->priority_class},
                        {"code", b.code.empty() ? "queued_next_cycle" : b.code},
                        {"reason", b.code.empty() ? "queued at the next cycle" : b.reason}};
    if (!job.hold.empty()) e["held"] = job.hold;
    AddArrayIds(job, e);
    blocked.push_back(std::move(e));
  }
  size_t total = out.size(), total_blocked = blocked.size();
  return nlohmann::json{{"queue", Page(std::move(out), page.offset, page.limit)},
                        {"total", total},
                        {"other_teams_waiting", others},
                        {"starting_next_cycle", starting},
                        {"blocked", Page(std::move(blocked), page.offset, page.limit)},
                        {"total_blocked", total_blocked}};
}

Answer ControllerState::Cluster() const {
  ClusterStatus st = ComputeStatus(snap_, options_.config.catalog);
  nlohmann::json body = StatusToJson(st);
  std::map<std::string, double> by_team;
  for (const RunningJob& r : snap_.running) {
    by_team[r.spec->team] += PlacementShare(r.placement, r.spec->request.sharing);
  }
  body["allocated_by_team"] = by_team;
  return body;
}

Answer ControllerState::Nodes(const Actor& who, const PageQuery& page) const {
  // Per node and GPU: the running jobs on it, each with its share of it.
  std::vector<std::map<int, std::vector<std::pair<const RunningJob*, const GpuShare*>>>> on(snap_.nodes.size());
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& g : ns.gpus) on[ns.node][g.gpu].emplace_back(&r, &g);
    }
  }
  const GpuCatalog& catalog = options_.config.catalog;
  nlohmann::json out = nlohmann::json::array();
  int end = page.limit > 0 ? std::min<int>(page.offset + page.limit, snap_.nodes.size()) : snap_.nodes.size();
  for (int n = page.offset; n < end; ++n) {
    nlohmann::json doc = NodeToDoc(snap_.nodes[n], catalog);
    doc["gpu_type"] = catalog.Get(snap_.nodes[n].gpu_type()).name;
    doc["agent_connected"] = nodes_.Link(static_cast<int>(n)) != nullptr;
    for (auto& g : doc["gpus"]) {
      int index = g["index"].get<int>();
      // Another team's jobs are a share of the GPU without a name (users see their team).
      nlohmann::json ids = nlohmann::json::array(), parts = nlohmann::json::array();
      for (const auto& [job, share] : on[n][index]) {
        const JobSpec& spec = *job->spec;
        bool visible = who.SeesTeam(spec.team);
        if (visible) ids.push_back(spec.id);
        nlohmann::json p = {{"share", GpuShareOf(*share, spec.request.sharing)},
                            {"sharing", ToString(HeldSharing(spec, job->placement))}};
        if (visible) p.update({{"job", spec.id}, {"team", spec.team}, {"user", spec.user}});
        if (share->mig_profile >= 0) p["mig_profile"] = share->mig_profile;
        parts.push_back(std::move(p));
      }
      g["jobs"] = ids;
      g["shares"] = parts;
      if (page.telemetry) {
        if (const NodeTable::Reading* reading = nodes_.ReadingOf(static_cast<int>(n), index)) {
          const auto& [sample, at] = *reading;
          g["telemetry"] = {{"utilization_pct", sample.util_pct},
                            {"memory_used_mib", sample.mem_used_mib},
                            {"memory_total_mib", sample.mem_total_mib},
                            {"temperature_c", sample.temperature_c},
                            {"power_w", sample.power_w},
                            {"age_s", static_cast<double>(now_ - at) / 1000.0}};
        }
      }
    }
    out.push_back(std::move(doc));
  }
  return nlohmann::json{{"nodes", out}, {"total", snap_.nodes.size()}, {"offset", page.offset}};
}

Answer ControllerState::SetDrain(const Actor& who, const std::string& node_id, int gpu, bool drain) {
  std::string action = fmt::format("POST /v1/nodes/{}/{}", node_id, drain ? "drain" : "undrain");
  std::string target = gpu < 0 ? node_id : fmt::format("{}:{}", node_id, gpu);
  if (!who.admin()) return Refuse(who, action, target, Status::Denied("", "only admins drain or undrain nodes"));
  const int n = nodes_.IndexOf(node_id);
  if (n < 0) return Refuse(who, action, target, {StatusCode::kNotFound, "no node " + node_id, "node"});
  Node& node = snap_.nodes[n];
  if (gpu >= static_cast<int>(node.gpus.size())) {
    return Refuse(who, action, target,
                  Status::Invalid("gpu", fmt::format("node {} has GPUs 0..{}", node_id, node.gpus.size() - 1)));
  }
  if (gpu >= 0) {
    node.gpus[gpu].fenced = drain;
    if (!drain) node.gpus[gpu].health = GpuHealth::kHealthy;  // an admin's undrain returns it to service
  } else if (!drain) {
    node.state = NodeState::kUp;
    node.labels.erase(kKubeDrainLabel);
  } else {
    node.labels.erase(kKubeDrainLabel);  // the admin's drain now: an uncordon does not undo it
    bool busy = false;
    for (const RunningJob& r : snap_.running) {
      for (const NodeShare& ns : r.placement.nodes) busy = busy || ns.node == n;
    }
    node.state = busy ? NodeState::kDraining : NodeState::kDrained;
  }
  PersistNode(n);
  NodeEvent(node_id, drain ? "drained" : "undrained", {{"gpu", gpu}, {"by", who.user}});
  Audit(who, action, target, "ok");
  dirty_ = true;
  return NodeToDoc(node, options_.config.catalog);
}

void ControllerState::WriteMetrics(MetricsWriter& w) {
  const GpuCatalog& catalog = options_.config.catalog;
  std::map<std::pair<std::string, std::string>, int> queued;
  for (const PendingJob& p : snap_.pending) queued[{p.spec->priority_class, p.spec->team}]++;
  w.Family("gantry_queue_jobs", "gauge", "Jobs waiting, by priority class and team");
  for (const auto& [k, v] : queued) w.Sample("gantry_queue_jobs", {{"class", k.first}, {"team", k.second}}, v);
  std::map<std::pair<std::string, std::string>, double> allocated;
  std::map<std::string, int> running;
  for (const RunningJob& r : snap_.running) {
    const std::string& type = catalog.Get(snap_.nodes[r.placement.nodes.front().node].gpu_type()).name;
    allocated[{type, r.spec->team}] += PlacementShare(r.placement, r.spec->request.sharing);
    running[r.spec->team]++;
  }
  w.Family("gantry_gpus_allocated", "gauge", "GPUs held by running jobs (fractions and MIG shares counted)");
  for (const auto& [k, v] : allocated)
    w.Sample("gantry_gpus_allocated", {{"gpu_type", k.first}, {"team", k.second}}, v);
  w.Family("gantry_jobs_running", "gauge", "Running jobs by team");
  for (const auto& [team, v] : running) w.Sample("gantry_jobs_running", {{"team", team}}, v);
  ClusterStatus st = ComputeStatus(snap_, catalog);
  w.Family("gantry_gpus", "gauge", "GPUs on nodes that are up or draining");
  for (const auto& [type, cap] : st.by_type) w.Sample("gantry_gpus", {{"gpu_type", type}}, cap.total);
  w.Family("gantry_gpus_available", "gauge", "Idle healthy GPUs on schedulable nodes");
  for (const auto& [type, cap] : st.by_type) w.Sample("gantry_gpus_available", {{"gpu_type", type}}, cap.available);
  w.Family("gantry_gpus_unavailable", "gauge", "GPUs out of service: on drained or down nodes, unhealthy or fenced");
  for (const auto& [type, cap] : st.by_type) {
    w.Sample("gantry_gpus_unavailable", {{"gpu_type", type}}, cap.unavailable);
  }
  std::map<std::string, double> oldest_wait;
  for (const PendingJob& p : snap_.pending) {
    double waited = static_cast<double>(now_ - p.submit_ms) / 1000.0;
    oldest_wait[p.spec->team] = std::max(oldest_wait[p.spec->team], waited);
  }
  w.Family("gantry_queue_oldest_wait_seconds", "gauge", "How long each team's oldest waiting job has waited");
  for (const auto& [team, v] : oldest_wait) w.Sample("gantry_queue_oldest_wait_seconds", {{"team", team}}, v);
  w.Family("gantry_team_guaranteed_gpus", "gauge", "Each team's guaranteed GPUs (team_quotas.yaml)");
  for (const auto& [team, quota] : quotas_->teams) {
    w.Sample("gantry_team_guaranteed_gpus", {{"team", team}}, quota.guaranteed_total());
  }
  w.Family("gantry_jobs_total", "counter", "Job transitions since the server started");
  for (const auto& [event, v] : counters_) w.Sample("gantry_jobs_total", {{"event", event}}, static_cast<double>(v));
  WriteGpuMetrics(w);
  WriteBillingMetrics(w);
  WritePoolMetrics(w);
}

void ControllerState::WriteLatencyMetrics(MetricsWriter& w) const {
  w.Write("gantry_submit_to_start_seconds", "From submit to the first start of a job", submit_to_start_seconds_);
}

nlohmann::json ControllerState::JobView(const std::string& id) { return ApiView(*Find(id), true); }

std::string ControllerState::JobName(const std::string& id) const {
  const JobRecord* job = Find(id);
  return job ? job->spec->name : "";
}

}  // namespace gantry
