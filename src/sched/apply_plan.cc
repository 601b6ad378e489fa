// ApplyPlan and ComputeStatus.
#include "sched/apply_plan.h"

#include <algorithm>
#include <vector>

#include "sched/usage.h"

namespace gantry {

void ApplyPlan(const Plan& plan, Snapshot& snap, OrderedQueue* queue) {
  for (const MigChange& c : plan.mig_changes) {
    Gpu& gpu = snap.nodes[c.node].gpus[c.gpu];
    std::erase_if(gpu.mig_instances, [&](const MigInstance& m) {
      return std::find(c.destroy.begin(), c.destroy.end(), m.placement) != c.destroy.end();
    });
    for (const MigPlacement& p : c.create) gpu.mig_instances.push_back({p, ""});
  }
  for (const Preemption& p : plan.preemptions) snap.running[p.running_index].stop_at_ms = p.stop_at_ms;
  for (const StartDecision& s : plan.starts) {
    const PendingJob& job = snap.pending[s.pending_index];
    RunningJob r{job.spec, snap.now_ms, s.placement, job.submit_ms};
    r.attained_gpu_ms = job.attained_gpu_ms;
    r.evictions = job.evictions;
    snap.running.push_back(std::move(r));
  }
  OrderedQueue unordered;  // with no keys, it only takes the started jobs out
  (queue ? *queue : unordered).TakeStarted(snap.pending, plan);
}

std::vector<std::string> RequeueStopped(Snapshot& snap) {
  std::vector<std::string> ids;
  std::erase_if(snap.running, [&](const RunningJob& r) {
    if (r.stop_at_ms > snap.now_ms) return false;
    double ran = static_cast<double>(snap.now_ms - r.start_ms);
    double share = PlacementShare(r.placement, r.spec->request.sharing);
    snap.pending.push_back({r.spec, r.submit_ms, r.attained_gpu_ms + ran * share, r.evictions + 1});
    ids.push_back(r.spec->id);
    return true;
  });
  return ids;
}

ClusterStatus ComputeStatus(const Snapshot& snap, const GpuCatalog& catalog) {
  ClusterStatus st;
  std::vector<std::vector<bool>> busy(snap.nodes.size());
  for (size_t n = 0; n < snap.nodes.size(); ++n) busy[n].assign(snap.nodes[n].gpus.size(), false);
  for (const RunningJob& j : snap.running) {
    for (const NodeShare& ns : j.placement.nodes) {
      if (ns.node < 0 || ns.node >= static_cast<int>(snap.nodes.size())) continue;
      const std::string& type = catalog.Get(snap.nodes[ns.node].gpu_type()).name;
      for (const GpuShare& g : ns.gpus) {
        if (g.gpu < 0 || g.gpu >= static_cast<int>(busy[ns.node].size())) continue;
        busy[ns.node][g.gpu] = true;
        double share = GpuShareOf(g, j.spec->request.sharing);
        st.by_type[type].allocated += share;
        st.allocated_gpus += share;
      }
    }
  }
  for (size_t n = 0; n < snap.nodes.size(); ++n) {
    const Node& node = snap.nodes[n];
    ++st.nodes;
    if (node.schedulable()) ++st.nodes_schedulable;
    bool out = node.state == NodeState::kDown || node.state == NodeState::kDrained;
    for (const Gpu& g : node.gpus) {
      TypeCapacity& cap = st.by_type[catalog.Get(g.type).name];
      if (out || g.health != GpuHealth::kHealthy || g.fenced) {
        ++cap.unavailable;
        ++st.unavailable_gpus;
      }
      if (out) continue;
      ++cap.total;
      ++st.total_gpus;
      bool free = node.schedulable() && g.health == GpuHealth::kHealthy && !g.fenced && !busy[n][g.index];
      if (free) {
        ++cap.available;
        ++st.available_gpus;
      }
    }
  }
  st.utilization = st.total_gpus > 0 ? st.allocated_gpus / st.total_gpus : 0.0;
  st.queued = static_cast<int>(snap.pending.size());
  st.running = static_cast<int>(snap.running.size());
  return st;
}

}  // namespace gantry
