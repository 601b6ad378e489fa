// Views of the controller's state (jobs, queue, cluster, nodes, metrics) and the admin's
// node drains. The Controller calls them on its thread, so each sees one consistent state.
#include <fmt/format.h>

#include "billing/report.h"
#include "sched/apply_plan.h"
#include "sched/plan_output.h"
#include "sched/usage.h"
#include "server/controller_state.h"
#include "server/node_json.h"

namespace gantry {

Answer ControllerState::GetJob(const Actor& who, const std::string& id) {
  JobRecord* job = Find(id);
  if (!job || !who.SeesTeam(job->spec->team)) return Status(StatusCode::kNotFound, "no job " + id, "id");
  nlohmann::json r = ApiView(*job, true);
  r["cost"] = RoundTo(accounting_.JobCost(*job, now_), 4);
  r["currency"] = options_.pricing.currency;
  if (job->idle_flagged) r["idle"] = true;
  if (nlohmann::json use = accounting_.JobUse(id); !use.empty()) r["gpu_use"] = std::move(use);
  return r;
}

Answer ControllerState::ListJobs(const Actor& who, const JobFilter& f) const {
  JobState wanted = JobState::kPending;
  bool active_only = f.state == "active";
  if (!f.state.empty() && !active_only && !ParseJobState(f.state, &wanted)) {
    return Status::Invalid(
        "state", "unknown state '" + f.state + "' (pending, running, stopping, succeeded, failed, cancelled, active)");
  }
  if (f.limit < 1 || f.limit > 10000) return Status::Invalid("limit", "must be within 1..10000");
  nlohmann::json out = nlohmann::json::array();
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && static_cast<int>(out.size()) < f.limit; ++it) {
    const JobRecord& job = it->second;
    const JobSpec& s = *job.spec;
    if (!who.SeesTeam(s.team)) continue;
    if (active_only && IsTerminal(job.state)) continue;
    if (!f.state.empty() && !active_only && job.state != wanted) continue;
    if (!f.team.empty() && s.team != f.team) continue;
    if (!f.user.empty() && s.user != f.user) continue;
    if (f.since_ms >= 0 && job.end_ms >= 0 && job.end_ms < f.since_ms) continue;
    if (f.until_ms >= 0 && job.submit_ms > f.until_ms) continue;
    out.push_back(ApiView(job, false));
  }
  return nlohmann::json{{"jobs", out}};
}

namespace {

void AddArrayIds(const JobRecord& job, nlohmann::json& e) {
  if (job.array_id == 0) return;
  e["array_job_id"] = std::to_string(job.array_id);
  e["array_task_id"] = job.array_task;
}

}  // namespace

Answer ControllerState::Queue(const Actor& who) {
  if (queue_cache_version_ != version_ || !queue_cache_) {
    snap_.now_ms = now_;
    OrderPending();  // the order the next cycle uses
    queue_cache_ = std::make_shared<Plan>(engine_->Schedule(snap_, {.explain = true, .pending_in_order = true}));
    queue_cache_version_ = version_;
  }
  const Plan& plan = *queue_cache_;
  TimeMs now = now_;
  nlohmann::json out = nlohmann::json::array();
  for (const WaitingJob& w : plan.waiting) {
    const JobRecord* job = Find(w.job_id);
    if (!job) continue;
    const JobSpec& s = *job->spec;
    bool visible = who.SeesTeam(s.team);
    nlohmann::json e = {{"position", w.position},
                        {"id", s.id},
                        {"team", s.team},
                        {"user", visible ? s.user : ""},
                        {"name", visible ? s.name : ""},
                        {"priority", s.priority_class},
                        {"gpus", JobGpuShare(s.request, options_.config.catalog)},
                        {"sharing", ToString(s.request.sharing)},
                        {"waiting_s", (now - job->submit_ms) / 1000},
                        {"code", ToString(w.code)},
                        {"reason", plan.reason(w)}};
    if (w.estimated_start_ms != kNever) e["estimated_start"] = FormatUtc(w.estimated_start_ms);
    AddArrayIds(*job, e);
    out.push_back(std::move(e));
  }
  nlohmann::json starting = nlohmann::json::array();
  for (const StartDecision& s : plan.starts) starting.push_back(s.job_id);
  // Held jobs, jobs waiting on a dependency and tasks over their array's limit are out of
  // the line until that changes.
  nlohmann::json blocked = nlohmann::json::array();
  GateScan scan;
  for (uint64_t seq : kept_out_) {
    const JobRecord& job = jobs_.at(seq);
    if (!who.SeesTeam(job.spec->team)) continue;
    Blocker b = WhyKeptOut(job, scan);
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
  return nlohmann::json{{"queue", out}, {"starting_next_cycle", starting}, {"blocked", blocked}};
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

Answer ControllerState::Nodes() const {
  std::vector<std::map<int, std::vector<std::string>>> users(snap_.nodes.size());
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& g : ns.gpus) users[ns.node][g.gpu].push_back(r.spec->id);
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t n = 0; n < snap_.nodes.size(); ++n) {
    nlohmann::json doc = NodeToDoc(snap_.nodes[n], options_.config.catalog);
    doc["gpu_type"] = options_.config.catalog.Get(snap_.nodes[n].gpu_type()).name;
    doc["agent_connected"] = node_link_[n] != nullptr;
    for (auto& g : doc["gpus"]) g["jobs"] = users[n][g["index"].get<int>()];
    out.push_back(std::move(doc));
  }
  return nlohmann::json{{"nodes", out}};
}

Answer ControllerState::SetDrain(const Actor& who, const std::string& node_id, int gpu, bool drain) {
  std::string action = fmt::format("POST /v1/nodes/{}/{}", node_id, drain ? "drain" : "undrain");
  std::string target = gpu < 0 ? node_id : fmt::format("{}:{}", node_id, gpu);
  if (!who.admin()) return Refuse(who, action, target, Status::Denied("", "only admins drain or undrain nodes"));
  auto it = node_index_.find(node_id);
  if (it == node_index_.end()) {
    return Refuse(who, action, target, {StatusCode::kNotFound, "no node " + node_id, "node"});
  }
  int n = it->second;
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
  } else {
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
  w.Family("gantry_gpus_total", "gauge", "GPUs on nodes that are up or draining");
  for (const auto& [type, cap] : st.by_type) w.Sample("gantry_gpus_total", {{"gpu_type", type}}, cap.total);
  w.Family("gantry_gpus_available", "gauge", "Idle healthy GPUs on schedulable nodes");
  for (const auto& [type, cap] : st.by_type) w.Sample("gantry_gpus_available", {{"gpu_type", type}}, cap.available);
  w.Family("gantry_jobs_total", "counter", "Job transitions since the server started");
  for (const auto& [event, v] : counters_) w.Sample("gantry_jobs_total", {{"event", event}}, static_cast<double>(v));
  WriteGpuMetrics(w);
  WriteBillingMetrics(w);
}

void ControllerState::WriteLatencyMetrics(MetricsWriter& w) const {
  w.Write("gantry_submit_to_start_seconds", "From submit to the first start of a job", submit_to_start_seconds_);
}

nlohmann::json ControllerState::JobView(const std::string& id) { return ApiView(*Find(id), true); }

}  // namespace gantry
