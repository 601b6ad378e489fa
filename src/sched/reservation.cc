// FindEarliestStart: per-node readiness from per-GPU free times.
#include "sched/reservation.h"

#include <algorithm>
#include <array>

#include "sched/plugins.h"

namespace gantry {

namespace {

struct NodeReady {
  TimeMs at = kNever;
  int node = 0;
  uint64_t gpus = 0;
};

// When node n can give `k` suitable GPUs plus the demand's CPUs and memory.
std::optional<NodeReady> ReadyTime(const ClusterState& state, int n, const Demand& d, int k) {
  const NodeUse& s = state.node(n);
  const bool want_mig = d.mode == SharingMode::kMig;
  // On the stack: this runs for every node of every blocked job's search (gpu_mask makes
  // 64 GPUs a node the most there can be).
  std::array<std::pair<TimeMs, int>, 64> free_at;
  int count = 0;
  for (int g = 0; g < s.gpu_count && g < 64; ++g) {
    const GpuUse& gs = state.gpu(n, g);
    if (!(d.gpu_mask >> g & 1) || !gs.usable || gs.mig_enabled != want_mig || (s.reserved_mask >> g & 1)) continue;
    free_at[count++] = {gs.jobs == 0 && !want_mig ? state.snapshot().now_ms : gs.busy_until, g};
  }
  if (count < k) return std::nullopt;
  std::partial_sort(free_at.begin(), free_at.begin() + k, free_at.begin() + count);
  NodeReady r;
  r.node = n;
  r.at = free_at[k - 1].first;
  for (int i = 0; i < k; ++i) r.gpus |= uint64_t{1} << free_at[i].second;
  // Host resources: free now (beside other reservations), or once the node empties.
  const Node& node = state.snapshot().nodes[n];
  if (s.free_cpus - s.reserved_cpus < d.cpus || s.free_memory - s.reserved_memory < d.memory_mib) {
    if (node.cpus - s.reserved_cpus < d.cpus || node.memory_mib - s.reserved_memory < d.memory_mib) return std::nullopt;
    r.at = std::max(r.at, s.busy_until);
  }
  return r;
}

}  // namespace

std::optional<EarliestStart> FindEarliestStart(const ClusterState& state, const Demand& d) {
  const auto& nodes = state.snapshot().nodes;
  std::vector<GangShape> shapes = d.gang_shapes;
  if (d.mode != SharingMode::kExclusive) shapes = {{1, 1}};
  std::optional<EarliestStart> best;
  for (const GangShape& shape : shapes) {
    for (GpuTypeId t : d.type_order) {
      std::vector<NodeReady> ready;
      for (int idle = 0; idle <= state.max_gpus_per_node(t); ++idle) {
        for (int n : state.NodesWithIdle(t, idle)) {
          if (!PassesStaticFilters(nodes[n], state.node(n), d)) continue;
          if (auto r = ReadyTime(state, n, d, shape.per_node)) ready.push_back(*r);
        }
      }
      if (static_cast<int>(ready.size()) < shape.nodes) continue;
      auto by_time = [](const NodeReady& a, const NodeReady& b) {
        return a.at < b.at || (a.at == b.at && a.node < b.node);
      };
      std::partial_sort(ready.begin(), ready.begin() + shape.nodes, ready.end(), by_time);
      TimeMs at = ready[shape.nodes - 1].at;
      if (best && best->at_ms <= at) continue;
      EarliestStart e;
      e.at_ms = at;
      for (int i = 0; i < shape.nodes; ++i) {
        NodeShare ns;
        ns.node = ready[i].node;
        ns.cpus = d.cpus;
        ns.memory_mib = d.memory_mib;
        for (int g = 0; g < 64; ++g) {
          if (ready[i].gpus >> g & 1) ns.gpus.push_back({.gpu = g});
        }
        e.placement.nodes.push_back(std::move(ns));
      }
      std::sort(e.placement.nodes.begin(), e.placement.nodes.end(),
                [](const NodeShare& a, const NodeShare& b) { return a.node < b.node; });
      best = std::move(e);
    }
  }
  return best;
}

}  // namespace gantry
