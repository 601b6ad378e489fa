// The filter and score plugins, and GPU choice within a node.
#include "sched/plugins.h"

#include <algorithm>
#include <array>
#include <bit>

#include "core/node_pools.h"

namespace gantry {

namespace {

bool NodeUp(const Node& node, const NodeUse& s, const Demand&) { return s.schedulable && node.schedulable(); }

bool GpuTypeAllowed(const Node&, const NodeUse& s, const Demand& d) {
  return s.gpu_count > 0 && (d.type_mask >> s.type & 1);
}

bool SelectorMatches(const Node& node, const NodeUse&, const Demand& d) {
  for (const auto& [key, value] : d.spec->node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

bool TaintsTolerated(const Node& node, const NodeUse&, const Demand& d) {
  return Tolerated(node.taints, d.spec->tolerations);
}

// A spot node (label gantry.io/capacity=spot) may be taken back at any time: it runs only
// work that may be evicted.
bool CapacityAllowed(const Node& node, const NodeUse&, const Demand& d) {
  if (d.spot_ok) return true;
  auto it = node.labels.find(kCapacityLabel);
  return it == node.labels.end() || it->second != "spot";
}

bool LargeEnough(const Node& node, const NodeUse& s, const Demand& d) {
  int per_node = 1;
  if (d.mode == SharingMode::kExclusive) {
    per_node = d.gang_shapes.empty() ? d.total_gpus() : d.gang_shapes.back().per_node;
  }
  return s.gpu_count >= per_node && node.cpus >= d.cpus && node.memory_mib >= d.memory_mib;
}

// A container job goes where the agent's probe container ran.
bool RunsContainers(const Node& node, const NodeUse&, const Demand& d) {
  return node.containers || !d.spec->container.enabled();
}

bool HasMigIfNeeded(const Node& node, const NodeUse&, const Demand& d) {
  if (d.mode != SharingMode::kMig) return true;
  for (const Gpu& g : node.gpus) {
    if (g.mig_enabled) return true;
  }
  return false;
}

// A filter added here goes into PassesStaticFilters below too (the placer's, the victim
// search's and the reservation's fast path; else it only shows in reasons), and into
// tests/sched/filter_plugins_test.cc, whose cases check the fast path against this table.
constexpr std::array<FilterPlugin, 8> kStatic = {{
    {"GpuType", "wrong GPU type", GpuTypeAllowed},
    {"Containers", "cannot run containers", RunsContainers},
    {"Capacity", "spot node, job not preemptible", CapacityAllowed},
    {"NodeSelector", "labels do not match", SelectorMatches},
    {"Taints", "untolerated taint", TaintsTolerated},
    {"NodeSize", "too small in total", LargeEnough},
    {"MigMode", "no GPU in MIG mode", HasMigIfNeeded},
    {"NodeState", "drained or down", NodeUp},
}};

double PackScore(const ScoreInput& in, const SchedulerConfig& c) {
  return c.strategy == PlacementStrategy::kPack ? in.fullness_after : 1.0 - in.fullness_after;
}

double TypeCostScore(const ScoreInput& in, const SchedulerConfig&) {
  size_t n = in.demand->type_order.size();
  return n <= 1 ? 1.0 : 1.0 - static_cast<double>(in.type_rank) / static_cast<double>(n - 1);
}

double NvlinkScore(const ScoreInput& in, const SchedulerConfig&) { return in.single_nvlink_group ? 1.0 : 0.0; }

double LabelScore(const ScoreInput& in, const SchedulerConfig&) {
  double total = 0;
  for (const LabelPreference& p : in.demand->spec->preferred_labels) {
    auto it = in.node->labels.find(p.key);
    if (it != in.node->labels.end() && it->second == p.value) total += p.weight;
  }
  return total;  // weights are the job's own; the config weight scales them
}

constexpr std::array<ScorePlugin, 4> kScores = {{
    {"PackOrSpread", &SchedulerConfig::weight_pack, PackScore},
    {"TypeCost", &SchedulerConfig::weight_type_cost, TypeCostScore},
    {"NvlinkGroup", &SchedulerConfig::weight_nvlink, NvlinkScore},
    {"PreferredLabels", &SchedulerConfig::weight_labels, LabelScore},
}};

}  // namespace

const FilterPlugin* StaticFilters(size_t* count) {
  *count = kStatic.size();
  return kStatic.data();
}

const FilterPlugin* FailedStaticFilter(const Node& node, const NodeUse& state, const Demand& d) {
  for (const FilterPlugin& f : kStatic) {
    if (!f.passes(node, state, d)) return &f;
  }
  return nullptr;
}

bool PassesStaticFilters(const Node& node, const NodeUse& state, const Demand& d) {
  return (d.type_mask >> state.type & 1) && (d.spec->node_selector.empty() || SelectorMatches(node, state, d)) &&
         (node.taints.empty() || TaintsTolerated(node, state, d)) && LargeEnough(node, state, d) &&
         CapacityAllowed(node, state, d) && RunsContainers(node, state, d);
}

double ScoreNode(const ScoreInput& in, const SchedulerConfig& config) {
  double total = 0;
  for (const ScorePlugin& p : kScores) total += config.*(p.weight) * p.score(in, config);
  return total;
}

uint64_t ChooseGpus(const ClusterState& state, int n, uint64_t mask, int k, bool* single_group) {
  const NodeUse& s = state.node(n);
  // Count candidate GPUs per NVLink group (groups are small integers).
  std::array<int, 64> per_group{};
  int max_group = 0;
  for (int g = 0; g < s.gpu_count; ++g) {
    if (mask >> g & 1) {
      int grp = std::clamp(state.gpu(n, g).nvlink_group, 0, 63);
      per_group[grp]++;
      max_group = std::max(max_group, grp);
    }
  }
  // Best fit: the fullest group that still holds all k.
  int best = -1;
  for (int grp = 0; grp <= max_group; ++grp) {
    if (per_group[grp] >= k && (best < 0 || per_group[grp] < per_group[best])) best = grp;
  }
  uint64_t chosen = 0;
  int taken = 0;
  auto take_from = [&](int grp) {
    for (int g = 0; g < s.gpu_count && taken < k; ++g) {
      if ((mask >> g & 1) && std::clamp(state.gpu(n, g).nvlink_group, 0, 63) == grp && !(chosen >> g & 1)) {
        chosen |= uint64_t{1} << g;
        ++taken;
      }
    }
  };
  if (best >= 0) {
    take_from(best);
    *single_group = true;
    return chosen;
  }
  // Spans groups: take the largest groups first.
  std::array<int, 64> order{};
  for (int i = 0; i <= max_group; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.begin() + max_group + 1,
                   [&](int a, int b) { return per_group[a] > per_group[b]; });
  for (int i = 0; i <= max_group && taken < k; ++i) take_from(order[i]);
  *single_group = false;
  return chosen;
}

}  // namespace gantry
