// PlanScaling: demand to pools by price, packing into requested and new nodes, and the
// idle nodes that go back.
#include "sched/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace gantry {

namespace {

// A job's share of one pool's nodes: how many nodes and how much of each (GPU x 1000).
struct Shape {
  int nodes = 1;
  int per_node_milli = kMilliPerGpu;
};

bool ShapeIn(const NodePool& pool, const JobSpec& spec, Shape* out) {
  const GpuRequest& r = spec.request;
  if (!r.whole_gpus()) {  // a fraction or a MIG instance: part of one GPU (a whole one, to be safe, for MIG)
    *out = {1, r.fractional() ? std::clamp(r.gpu_milli, 1, kMilliPerGpu) : kMilliPerGpu};
    return true;
  }
  const int total = std::max(r.gpus, 1);
  const int nodes = r.num_nodes > 0 ? r.num_nodes : (total + pool.gpus_per_node - 1) / pool.gpus_per_node;
  const int per_node = (total + nodes - 1) / nodes;
  if (per_node > pool.gpus_per_node) return false;
  *out = {nodes, per_node * kMilliPerGpu};
  return true;
}

std::string Minutes(DurationMs d) { return fmt::format("{} min", (d + kMinuteMs - 1) / kMinuteMs); }

}  // namespace

bool PoolFits(const NodePool& pool, const GpuCatalog& catalog, const JobSpec& spec) {
  const GpuRequest& r = spec.request;
  if (!r.gpu_types.empty() &&
      std::find(r.gpu_types.begin(), r.gpu_types.end(), catalog.Get(pool.type).name) == r.gpu_types.end()) {
    return false;
  }
  if (!r.mig_profile.empty() && catalog.Get(pool.type).FindMigProfile(r.mig_profile) < 0) return false;
  if (r.gpu_memory_mib > 0 && r.gpu_memory_mib > catalog.Get(pool.type).memory_mib) return false;
  for (const auto& [key, value] : spec.node_selector) {
    auto it = pool.labels.find(key);
    if (it == pool.labels.end() || it->second != value) return false;
  }
  if (!Tolerated(pool.taints, spec.tolerations)) return false;
  if (pool.cpus > 0 && r.cpus > pool.cpus) return false;
  if (pool.memory_mib > 0 && r.memory_mib > pool.memory_mib) return false;
  Shape shape;
  return ShapeIn(pool, spec, &shape);
}

ScalingPlan PlanScaling(const AutoscalerConfig& config, const GpuCatalog& catalog,
                        const std::vector<PoolStatus>& status, const std::vector<ScalingDemand>& demand, TimeMs now) {
  ScalingPlan plan;
  const size_t n = config.pools.size();
  // Room on the nodes each pool is getting (requested and added this round), GPU x 1000.
  std::vector<std::vector<int>> room(n);
  std::vector<bool> demanded(n, false);
  std::vector<int> size(n, 0);  // up + requested + added
  for (size_t p = 0; p < n; ++p) {
    const NodePool& pool = config.pools[p];
    room[p].assign(status[p].requested, pool.gpus_per_node * kMilliPerGpu);
    size[p] = status[p].up + status[p].requested;
    if (size[p] < pool.min_nodes) {  // back to the minimum
      plan.add[p] = pool.min_nodes - size[p];
      room[p].insert(room[p].end(), pool.min_nodes - size[p], pool.gpus_per_node * kMilliPerGpu);
      size[p] = pool.min_nodes;
    }
  }
  // Pools by price, cheapest first (ties: as configured).
  std::vector<size_t> by_price(n);
  std::iota(by_price.begin(), by_price.end(), 0);
  std::stable_sort(by_price.begin(), by_price.end(), [&](size_t a, size_t b) {
    return config.pools[a].PricePerGpuHour(catalog) < config.pools[b].PricePerGpuHour(catalog);
  });

  for (const ScalingDemand& d : demand) {
    if (now - d.waiting_since < config.scale_up_after) continue;
    const JobSpec& spec = *d.spec;
    bool placed = false, any_fit = false;
    std::string waits;
    for (size_t p : by_price) {
      const NodePool& pool = config.pools[p];
      if (!PoolFits(pool, catalog, spec)) continue;
      any_fit = true;
      if (pool.capacity == Capacity::kSpot && (d.on_demand_only || !spec.preemptible)) continue;
      if (d.reserved_start_ms != kNever && d.reserved_start_ms <= now + pool.startup_ms) {
        waits = "its reservation, sooner than a new node";
        break;
      }
      if (pool.capacity == Capacity::kSpot && status[p].no_capacity_since != kNever) {
        DurationMs since = now - status[p].no_capacity_since;
        if (since < config.spot_fallback_after) {
          waits = fmt::format("spot capacity in pool {} (none for {}; on-demand after {})", pool.name, Minutes(since),
                              Minutes(config.spot_fallback_after));
          break;
        }
        continue;  // falls back to the next pool by price: on-demand
      }
      Shape shape;
      ShapeIn(pool, spec, &shape);
      std::vector<int> trial = room[p];
      int grown = 0;
      for (int part = 0; part < shape.nodes; ++part) {
        auto fit = std::find_if(trial.begin(), trial.end(), [&](int free) { return free >= shape.per_node_milli; });
        if (fit == trial.end()) {
          if (size[p] + grown >= pool.max_nodes) break;
          trial.push_back(pool.gpus_per_node * kMilliPerGpu);
          fit = trial.end() - 1;
          ++grown;
        }
        *fit -= shape.per_node_milli;
        if (part + 1 == shape.nodes) placed = true;
      }
      if (!placed) {
        waits = fmt::format("pool {} at its maximum of {} nodes", pool.name, pool.max_nodes);
        continue;
      }
      room[p] = std::move(trial);
      size[p] += grown;
      if (grown > 0) plan.add[p] += grown;
      demanded[p] = true;
      plan.waiting_for[spec.id] = "a node from pool " + pool.name;
      break;
    }
    if (!placed && !waits.empty()) plan.waiting_for[spec.id] = waits;
    if (!any_fit) plan.waiting_for[spec.id] = "no pool has nodes that fit it";
  }

  for (size_t p = 0; p < n; ++p) {
    if (demanded[p] || plan.add.count(p)) continue;
    std::vector<std::pair<std::string, TimeMs>> idle = status[p].idle;
    std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    int spare = status[p].up - config.pools[p].min_nodes;
    for (const auto& [node, since] : idle) {
      if (spare <= 0 || now - since < config.scale_down_after) break;
      plan.remove.push_back(node);
      --spare;
    }
  }
  return plan;
}

}  // namespace gantry
