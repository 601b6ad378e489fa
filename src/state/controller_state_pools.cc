// Node pools on the controller: the autoscaler's decision on the engine's waiting jobs
// (not those held by quota, budget or hold: the engine marks those, and held or dependent
// jobs are kept out of its queue altogether), the hook calls it makes, their results, the
// pool nodes that register or go back, and spot reclaim notices.
#include <fmt/format.h>

#include <algorithm>

#include "state/controller_state.h"

namespace gantry {

namespace {

const Actor kAutoscaler{"gantry-autoscaler", "", Role::kAdmin};
// The store's meta row with the autoscaler's requests (Autoscaling::Requests).
constexpr const char* kAutoscalerRequests = "autoscaler_requests";

}  // namespace

void ControllerState::AdoptPoolNode(Node& node) {
  int pool = autoscaling_.PoolOf(node.id, node.labels);
  if (pool < 0) return;
  autoscaling_.Adopt(static_cast<size_t>(pool), node);
  SaveAutoscalerRequests();
}

void ControllerState::SaveAutoscalerRequests() {
  if (autoscaling_.Changed())
    SetMetaValue(kAutoscalerRequests, autoscaling_.Requests().dump(-1, ' ', false, kReplaceBadUtf8));
}

void ControllerState::RestoreAutoscalerRequests() {
  std::string saved = MetaValue(kAutoscalerRequests);
  if (!saved.empty()) autoscaling_.Restore(nlohmann::json::parse(saved, nullptr, false), now_);
}

Status ControllerState::AdmitPoolNode(const std::string& pool, const Node& node) const {
  int index = autoscaling_.PoolIndex(pool);
  if (index < 0) return Status::Denied("node_id", fmt::format("pool {} is not configured (pools.yaml)", pool));
  const auto p = static_cast<size_t>(index);
  const NodePool& cfg = autoscaling_.config().pools[p];
  const int known = nodes_.IndexOf(node.id);
  // A node the pool gave back (down) comes back only under a new scale-up's printed ids.
  const bool returned = known >= 0 && snap_.nodes[known].state == NodeState::kDown;
  if (known >= 0) {
    auto label = snap_.nodes[known].labels.find("pool");
    if (label == snap_.nodes[known].labels.end() || label->second != pool) {
      return Status::Denied("node_id", fmt::format("node {} is not a node of pool {}", node.id, pool));
    }
  }
  if ((known < 0 || returned) && !autoscaling_.Awaits(p, node.id)) {
    if (!autoscaling_.AdoptsUnknownIds(p, now_)) {
      if (autoscaling_.UpRunning(p)) {
        // Its agent may be up before the hook prints the ids it started: it tries again.
        return Status(
            StatusCode::kUnavailable,
            fmt::format("pool {}'s scale-up has not printed node {} (yet): try again when it has", pool, node.id),
            "node_id");
      }
      return Status::Denied("node_id",
                            fmt::format("node {} was not started by pool {}'s scale-up hook", node.id, pool));
    }
    int members = 0;
    for (const Node& n : snap_.nodes) {
      auto label = n.labels.find("pool");
      members += label != n.labels.end() && label->second == pool && n.state != NodeState::kDown;
    }
    if (members >= cfg.max_nodes) {
      return Status::Denied("node_id",
                            fmt::format("pool {} has its {} node(s) (max_nodes) already", pool, cfg.max_nodes));
    }
  }
  const GpuType& type = options_.config.catalog.Get(cfg.type);
  bool shape = node.gpus.size() == static_cast<size_t>(cfg.gpus_per_node) &&
               std::all_of(node.gpus.begin(), node.gpus.end(), [&](const Gpu& g) { return g.type == cfg.type; });
  if (!shape) {
    std::string has = node.gpus.empty()
                          ? "no GPU"
                          : fmt::format("{} x {}", node.gpus.size(), options_.config.catalog.Get(node.gpu_type()).name);
    return Status::Denied("inventory", fmt::format("pool {}'s nodes have {} x {}; node {} reports {}", pool,
                                                   cfg.gpus_per_node, type.name, node.id, has));
  }
  if (cfg.cpus > 0 && node.cpus > cfg.cpus) {
    return Status::Denied(
        "cpus", fmt::format("pool {}'s nodes have {} CPUs; node {} reports {}", pool, cfg.cpus, node.id, node.cpus));
  }
  if (cfg.memory_mib > 0 && node.memory_mib > cfg.memory_mib) {
    return Status::Denied("memory_mib", fmt::format("pool {}'s nodes have {} MiB of memory; node {} reports {}", pool,
                                                    cfg.memory_mib, node.id, node.memory_mib));
  }
  return Status::Ok();
}

Status ControllerState::CheckAdmissibleNow(const JobSpec& spec) const {
  if (snap_.nodes.empty()) return Status::Ok();
  Status s = CheckAdmissible(spec, snap_.nodes, options_.config.catalog);
  if (s.ok()) return s;
  for (const NodePool& pool : autoscaling_.config().pools) {
    if (PoolFits(pool, options_.config.catalog, spec)) return Status::Ok();
  }
  return s;
}

std::vector<PoolNode> ControllerState::PoolNodes() const {
  std::set<int> busy;
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) busy.insert(ns.node);
  }
  std::vector<PoolNode> nodes;
  for (size_t n = 0; n < snap_.nodes.size(); ++n) {
    const Node& node = snap_.nodes[n];
    if (node.state == NodeState::kDown) continue;
    int pool = autoscaling_.PoolOf("", node.labels);  // by its `pool` label
    if (pool < 0) continue;
    nodes.push_back({node.id, static_cast<size_t>(pool),
                     node.state == NodeState::kUp && !nodes_.Reclaiming(static_cast<int>(n)),
                     !busy.count(static_cast<int>(n))});
  }
  return nodes;
}

Answer ControllerState::Pools() const {
  return nlohmann::json{{"enabled", autoscaling_.enabled()}, {"pools", autoscaling_.View(PoolNodes(), now_)}};
}

void ControllerState::Autoscale() {
  const Plan& plan = ExplainedPlan();
  std::map<std::string, TimeMs> reserved;
  for (const Reservation& r : plan.reservations) reserved[r.job_id] = r.start_ms;
  std::vector<ScalingDemand> demand;
  for (const WaitingJob& w : plan.waiting) {
    if (w.code == WaitCode::kQuota || w.code == WaitCode::kHeld || w.code == WaitCode::kPreempting) continue;
    const JobRecord* job = Find(w.job_id);
    if (!job) continue;
    bool critical = false;
    for (const PriorityClass& c : options_.config.scheduler.priority_classes) {
      if (c.name == job->spec->priority_class) critical = !c.preemptible;
    }
    auto r = reserved.find(w.job_id);
    demand.push_back({job->spec.get(), std::max(job->submit_ms, job->last_exit_ms),
                      r == reserved.end() ? kNever : r->second, critical});
  }
  Autoscaling::Decision d = autoscaling_.Run(PoolNodes(), demand, now_);
  for (const std::string& line : d.log) log_(line);
  for (const std::string& id : d.drain) {
    const int n = nodes_.IndexOf(id);
    if (n < 0) continue;
    snap_.nodes[n].state = NodeState::kDrained;  // idle: it takes nothing more
    PersistNode(n);
    NodeEvent(id, "drained", {{"by", kAutoscaler.user}, {"reason", "idle above its pool's minimum"}});
    dirty_ = true;
  }
  SaveAutoscalerRequests();
  for (HookCall& call : d.hooks) {
    Audit(kAutoscaler, ToString(call.kind), call.pool_name, "started",
          call.kind == HookCall::Kind::kScaleUp ? fmt::format("{} node(s)", call.count)
                                                : fmt::format("{}", fmt::join(call.nodes, ", ")));
    effects_.hooks.push_back(std::move(call));
  }
}

void ControllerState::HookFinished(const HookCall& call, const CommandResult& result) {
  Autoscaling::Outcome out = autoscaling_.Finished(call, result, now_);
  // Nodes that registered while the hook still ran are here already.
  for (const std::string& id : out.requested) {
    const int n = nodes_.IndexOf(id);
    if (n >= 0 && snap_.nodes[n].state != NodeState::kDown) {
      autoscaling_.Adopt(call.pool, snap_.nodes[n]);
    }
  }
  for (const std::string& line : out.log) log_(line);
  Audit(kAutoscaler, ToString(call.kind), call.pool_name, out.audit_outcome,
        fmt::format("{} in {:.1f} s{}", result.Outcome(), static_cast<double>(result.took_ms) / 1000,
                    out.audit_detail.empty() ? "" : ": " + out.audit_detail));
  for (const std::string& id : out.returned) ReturnPoolNode(id);
  for (const std::string& id : out.undrain) {
    const int n = nodes_.IndexOf(id);
    if (n < 0 || snap_.nodes[n].state != NodeState::kDrained) continue;
    snap_.nodes[n].state = NodeState::kUp;
    PersistNode(n);
    NodeEvent(id, "undrained", {{"by", kAutoscaler.user}, {"reason", "its scale-down failed"}});
  }
  SaveAutoscalerRequests();
  version_++;  // the queue's reasons changed
  dirty_ = true;
}

// A node its cloud took back leaves the cluster: down, no link; it was idle, so no job ends.
// A node that registers again with the same id comes back as a new member of its pool.
void ControllerState::ReturnPoolNode(const std::string& node_id) {
  const int n = nodes_.IndexOf(node_id);
  if (n < 0) return;
  snap_.nodes[n].state = NodeState::kDown;
  nodes_.Detach(n);
  PersistNode(n);
  NodeEvent(node_id, "returned", {{"pool", snap_.nodes[n].labels["pool"]}});
  dirty_ = true;
}

void ControllerState::Reclaim(const NodeNotice& notice) {
  const int n = nodes_.IndexOf(notice.node_id);
  if (n < 0) return;
  if (!nodes_.NoteReclaim(n)) return;  // one notice is enough
  Node& node = snap_.nodes[n];
  auto label = node.labels.find("pool");
  const std::string pool = label == node.labels.end() ? "" : label->second;
  reclaims_by_pool_[pool]++;
  std::vector<std::string> victims;
  for (const RunningJob& r : snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      if (ns.node == n) victims.push_back(r.spec->id);
    }
  }
  if (node.state == NodeState::kUp) node.state = victims.empty() ? NodeState::kDrained : NodeState::kDraining;
  node.labels.erase(kKubeDrainLabel);  // the drain is the reclaim's now: an uncordon does not undo it
  PersistNode(n);
  const DurationMs in = notice.reclaim_in_ms;
  NodeEvent(node.id, "reclaim_notice", {{"in_ms", in}, {"source", notice.source}, {"jobs", victims.size()}});
  log_(fmt::format("node {} (pool {}) is reclaimed by its cloud in {} s: drained; {} job(s) stop and requeue", node.id,
                   pool.empty() ? "-" : pool, in / kSecondMs, victims.size()));
  const DurationMs grace = std::min(in, options_.config.scheduler.grace_period_ms);
  for (const std::string& id : victims) {
    JobRecord& job = *Find(id);
    Event(job, "reclaim", {{"node", node.id}, {"pool", pool}, {"in_ms", in}, {"grace_ms", grace}});
    counters_["reclaimed"]++;
    if (job.state != JobState::kRunning) continue;  // stopping already: its stop goes on
    StopRunning(job, StopCause::kReclaim,
                fmt::format("node {} is reclaimed by its cloud (spot) in {} s: checkpoint and requeue", node.id,
                            in / kSecondMs),
                grace);
  }
  dirty_ = true;
}

void ControllerState::WritePoolMetrics(MetricsWriter& w) const {
  autoscaling_.WriteMetrics(w);
  w.Family("gantry_spot_reclaims_total", "counter", "Reclaim notices from nodes' clouds, by pool");
  for (const auto& [pool, count] : reclaims_by_pool_) {
    w.Sample("gantry_spot_reclaims_total", {{"pool", pool}}, static_cast<double>(count));
  }
}

}  // namespace gantry
