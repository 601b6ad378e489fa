// The admin's node drains, the state's metric families (Prometheus), and a job's API view
// by id. The API's views of jobs, queue, cluster, nodes and teams are StateViews'
// (state_views.cc).
#include <fmt/format.h>

#include <map>

#include "sched/apply_plan.h"
#include "sched/usage.h"
#include "state/controller_state.h"

namespace gantry {

const Plan& ControllerState::ExplainedPlan() {
  if (queue_cache_version_ != version_ || !queue_cache_) {
    snap_.now_ms = now_;
    MergeNewPending();  // the order the next cycle uses, unless it re-keys
    queue_cache_ = std::make_shared<Plan>(engine_->Schedule(snap_, {.explain = true, .pending_in_order = true}));
    queue_cache_version_ = version_;
  }
  return *queue_cache_;
}

Status ControllerState::SetDrain(const Actor& who, const std::string& node_id, int gpu, bool drain) {
  const std::string action = ActionWords(drain ? StateAction::kDrain : StateAction::kUndrain, node_id);
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
  return Status::Ok();
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
