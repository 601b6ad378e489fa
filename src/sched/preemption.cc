// VictimFinder: cheapest GPUs to free per node; per gang the nodes with the fewest victims,
// then the least lost work; minimality.
#include "sched/preemption.h"

#include <algorithm>
#include <bit>
#include <set>

#include "sched/plugins.h"
#include "sched/usage.h"

namespace gantry {

VictimFinder::VictimFinder(const ClusterState& state, const Snapshot& snap) : state_(state), snap_(snap) {
  int total = 0;
  for (const Node& n : snap.nodes) {
    flat_.push_back(total);
    total += static_cast<int>(n.gpus.size());
  }
  occupants_.resize(total);
  for (size_t i = 0; i < snap.running.size(); ++i) {
    for (const NodeShare& ns : snap.running[i].placement.nodes) {
      if (ns.node < 0 || ns.node >= static_cast<int>(snap.nodes.size())) continue;
      for (const GpuShare& g : ns.gpus) {
        if (g.gpu >= 0 && g.gpu < static_cast<int>(snap.nodes[ns.node].gpus.size())) {
          occupants_[flat_[ns.node] + g.gpu].push_back(i);
        }
      }
    }
  }
}

double VictimFinder::LostWork(size_t i) const {
  const RunningJob& r = snap_.running[i];
  TimeMs since = std::max(r.start_ms, r.last_checkpoint_ms);
  return static_cast<double>(std::max<TimeMs>(0, snap_.now_ms - since)) *
         PlacementShare(r.placement, r.spec->request.sharing);
}

std::optional<VictimFinder::NodeOption> VictimFinder::CheapestOnNode(int n, int k, const Demand& d,
                                                                     const std::vector<char>& eligible,
                                                                     const std::vector<char>& stopping) const {
  const NodeUse& s = state_.node(n);
  const bool mig = d.mode == SharingMode::kMig;
  struct Candidate {
    int gpu;
    double cost;
    std::vector<size_t> victims;
  };
  std::vector<Candidate> candidates;
  for (int g = 0; g < s.gpu_count; ++g) {
    const GpuUse& use = state_.gpu(n, g);
    if (!(d.gpu_mask >> g & 1) || !use.usable || use.mig_enabled != mig || (s.reserved_mask >> g & 1)) continue;
    const std::vector<size_t>& occ = occupants_[flat_[n] + g];
    if (static_cast<size_t>(use.jobs) > occ.size()) continue;  // holds a job started this cycle
    Candidate c{g, 0, {}};
    bool ok = true;
    for (size_t i : occ) {
      if (stopping[i]) continue;
      if (!eligible[i]) {
        ok = false;
        break;
      }
      c.victims.push_back(i);
      int here = 0;  // GPUs the victim frees on this node
      for (const NodeShare& ns : snap_.running[i].placement.nodes)
        here += ns.node == n ? static_cast<int>(ns.gpus.size()) : 0;
      c.cost += LostWork(i) / std::max(1, here);
    }
    if (ok) candidates.push_back(std::move(c));
  }
  if (static_cast<int>(candidates.size()) < k) return std::nullopt;
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.victims.size() < b.victims.size();
  });
  NodeOption opt;
  opt.node = n;
  std::set<size_t> victims;
  for (int i = 0; i < k; ++i) {
    opt.gpus |= uint64_t{1} << candidates[i].gpu;
    victims.insert(candidates[i].victims.begin(), candidates[i].victims.end());
  }
  // Evicting a victim frees all its GPUs here: count the ones the cheapest pick missed.
  opt.victims.assign(victims.begin(), victims.end());
  int cpus = s.free_cpus;
  for (size_t v : opt.victims) {
    opt.cost += LostWork(v);
    for (const NodeShare& ns : snap_.running[v].placement.nodes) cpus += ns.node == n ? ns.cpus : 0;
  }
  if (cpus < d.cpus) return std::nullopt;
  return opt;
}

bool VictimFinder::NodeFreeable(int n, int k, const Demand& d, const std::vector<char>& evicted,
                                const std::vector<char>& stopping) const {
  const NodeUse& s = state_.node(n);
  const bool mig = d.mode == SharingMode::kMig;
  int free = 0;
  for (int g = 0; g < s.gpu_count && free < k; ++g) {
    const GpuUse& use = state_.gpu(n, g);
    if (!(d.gpu_mask >> g & 1) || !use.usable || use.mig_enabled != mig || (s.reserved_mask >> g & 1)) continue;
    const std::vector<size_t>& occ = occupants_[flat_[n] + g];
    if (static_cast<size_t>(use.jobs) > occ.size()) continue;
    bool ok = true;
    for (size_t i : occ) ok = ok && (stopping[i] || evicted[i]);
    free += ok ? 1 : 0;
  }
  return free >= k;
}

std::optional<VictimChoice> VictimFinder::Find(const Demand& d, const std::vector<char>& eligible,
                                               const std::vector<char>& stopping) const {
  std::vector<GangShape> shapes = d.gang_shapes;
  if (d.mode != SharingMode::kExclusive) shapes = {{1, 1}};
  std::optional<std::vector<NodeOption>> best;
  double best_cost = 0;
  size_t best_count = 0;
  for (const GangShape& shape : shapes) {
    for (GpuTypeId t : d.type_order) {
      std::vector<NodeOption> options;
      for (int idle = 0; idle <= state_.max_gpus_per_node(t); ++idle) {
        for (int n : state_.NodesWithIdle(t, idle)) {
          if (!PassesStaticFilters(snap_.nodes[n], state_.node(n), d)) continue;
          if (auto o = CheapestOnNode(n, shape.per_node, d, eligible, stopping)) options.push_back(std::move(*o));
        }
      }
      if (static_cast<int>(options.size()) < shape.nodes) continue;
      std::sort(options.begin(), options.end(), [](const NodeOption& a, const NodeOption& b) {
        if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
        if (a.cost != b.cost) return a.cost < b.cost;
        return a.node < b.node;
      });
      options.resize(shape.nodes);
      std::set<size_t> all;
      for (const NodeOption& o : options) all.insert(o.victims.begin(), o.victims.end());
      double cost = 0;
      for (size_t v : all) cost += LostWork(v);
      if (!best || all.size() < best_count || (all.size() == best_count && cost < best_cost)) {
        best = options;
        best_cost = cost;
        best_count = all.size();
      }
    }
  }
  if (!best) return std::nullopt;
  VictimChoice choice;
  std::vector<char> evicted(snap_.running.size(), 0);
  std::set<size_t> all;
  for (const NodeOption& o : *best) all.insert(o.victims.begin(), o.victims.end());
  for (size_t v : all) evicted[v] = 1;
  // Never more than needed: drop the costliest victims the gang can do without.
  std::vector<size_t> by_cost(all.begin(), all.end());
  std::sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return LostWork(a) > LostWork(b); });
  const int k = best->front().gpus ? std::popcount(best->front().gpus) : 1;
  for (size_t v : by_cost) {
    evicted[v] = 0;
    bool still = true;
    for (const NodeOption& o : *best) still = still && NodeFreeable(o.node, k, d, evicted, stopping);
    if (!still) evicted[v] = 1;
  }
  for (size_t v : by_cost) {
    if (evicted[v]) {
      choice.victims.push_back(v);
      choice.lost_gpu_ms += LostWork(v);
    }
  }
  std::sort(choice.victims.begin(), choice.victims.end());
  for (const NodeOption& o : *best) {
    NodeShare ns;
    ns.node = o.node;
    ns.cpus = d.cpus;
    ns.memory_mib = d.memory_mib;
    // Hold the GPUs that are free once the remaining victims are gone.
    int taken = 0;
    for (int g = 0; g < state_.node(o.node).gpu_count && taken < k; ++g) {
      const GpuUse& use = state_.gpu(o.node, g);
      if (!(d.gpu_mask >> g & 1) || !use.usable || use.mig_enabled != (d.mode == SharingMode::kMig) ||
          (state_.node(o.node).reserved_mask >> g & 1)) {
        continue;
      }
      const std::vector<size_t>& occ = occupants_[flat_[o.node] + g];
      if (static_cast<size_t>(use.jobs) > occ.size()) continue;
      bool ok = true;
      for (size_t i : occ) ok = ok && (stopping[i] || evicted[i]);
      if (ok) {
        ns.gpus.push_back({.gpu = g});
        ++taken;
      }
    }
    choice.hold.nodes.push_back(std::move(ns));
  }
  return choice;
}

}  // namespace gantry
