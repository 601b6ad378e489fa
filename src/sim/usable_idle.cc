// Counting the idle GPUs that waiting work could have used (sim/usable_idle.h).
#include "sim/usable_idle.h"

#include <algorithm>
#include <climits>

namespace gantry {

void UsableIdle::Change(const JobSpec& spec, double gpus, int sign) {
  const GpuRequest& r = spec.request;
  // A MIG slice needs a GPU in MIG mode, and those are never idle here.
  if (r.sharing == SharingMode::kMig) return;
  // The types the engine's demand would allow (CompileDemand's mask), without compiling
  // it each time a job comes or goes: only a shape not seen yet is compiled for its layouts.
  const uint64_t allowed = AllowedTypeMask(r, catalog_);
  uint64_t types = 0;
  for (const GpuType& t : catalog_.types()) {
    if ((allowed >> t.id & 1) && TypeCanServe(t, r)) types |= uint64_t{1} << t.id;
  }
  Shape shape{.types = types, .gpus = r.whole_gpus() ? r.gpus : 0, .num_nodes = r.num_nodes};
  auto [it, added] = waiting_.try_emplace(shape);
  Waiting& w = it->second;
  if (added) {
    w.layouts =
        r.whole_gpus() ? CompileDemand(spec, catalog_, max_gpus_per_type_).gang_shapes : std::vector<GangShape>{{1, 1}};
  }
  w.jobs += sign;
  w.gpus += sign * gpus;
  if (w.jobs <= 0) waiting_.erase(it);
}

double UsableIdle::Count(const std::vector<GpuTypeId>& types, const std::vector<int>& idle) const {
  int most = 0;
  for (int i : idle) most = std::max(most, i);
  if (most == 0 || waiting_.empty()) return 0;
  // Per GPU type, suffix sums over the nodes' idle counts: nodes with at least k idle GPUs,
  // and the idle GPUs on them.
  const size_t type_count = catalog_.size();
  std::vector<std::vector<int>> nodes_at_least(type_count, std::vector<int>(most + 2, 0));
  std::vector<std::vector<int>> idle_at_least(type_count, std::vector<int>(most + 2, 0));
  for (size_t n = 0; n < idle.size(); ++n) {
    if (idle[n] <= 0 || static_cast<size_t>(types[n]) >= type_count) continue;
    nodes_at_least[types[n]][idle[n]]++;
    idle_at_least[types[n]][idle[n]] += idle[n];
  }
  for (size_t t = 0; t < type_count; ++t) {
    for (int k = most - 1; k >= 1; --k) {
      nodes_at_least[t][k] += nodes_at_least[t][k + 1];
      idle_at_least[t][k] += idle_at_least[t][k + 1];
    }
  }
  // Per type, the fewest idle GPUs a node needs for some waiting job to start with it among
  // its nodes: every idle GPU on such a node is one that job could use.
  std::vector<int> least_usable(type_count, INT_MAX);
  double asked = 0;  // by the jobs that could start
  for (const auto& [shape, w] : waiting_) {
    bool could_start = false;
    for (size_t t = 0; t < type_count; ++t) {
      if (!(shape.types >> t & 1)) continue;
      for (const GangShape& layout : w.layouts) {
        if (layout.per_node > most || nodes_at_least[t][layout.per_node] < layout.nodes) continue;
        least_usable[t] = std::min(least_usable[t], layout.per_node);
        could_start = true;
      }
    }
    if (could_start) asked += w.gpus;
  }
  double usable = 0;
  for (size_t t = 0; t < type_count; ++t) {
    if (least_usable[t] != INT_MAX) usable += idle_at_least[t][least_usable[t]];
  }
  return std::min(usable, asked);
}

}  // namespace gantry
