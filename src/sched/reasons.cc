// Diagnose: per-filter node counts turned into a sentence.
#include "sched/reasons.h"

#include <fmt/format.h>

#include <bit>
#include <string_view>
#include <vector>

#include "sched/plugins.h"

namespace gantry {

namespace {

std::string NeedText(const Demand& d) {
  const GpuRequest& r = d.spec->request;
  if (!r.gpu_indices.empty()) {
    return fmt::format("needs {} pinned to GPUs {}", d.mode == SharingMode::kExclusive ? "its GPUs" : "its share",
                       fmt::join(r.gpu_indices, ","));
  }
  switch (d.mode) {
    case SharingMode::kExclusive: {
      const GangShape& s = d.gang_shapes.empty() ? GangShape{1, r.gpus} : d.gang_shapes.front();
      if (s.nodes == 1) return fmt::format("needs {} GPU{} on one node", s.per_node, s.per_node == 1 ? "" : "s");
      return fmt::format("needs {} nodes with {} free GPU{} each", s.nodes, s.per_node, s.per_node == 1 ? "" : "s");
    }
    case SharingMode::kTimeSlice: return fmt::format("needs {:g} of a GPU (time-slice)", r.gpu_milli / 1000.0);
    case SharingMode::kMps: return fmt::format("needs {:g} of a GPU (MPS)", r.gpu_milli / 1000.0);
    case SharingMode::kMig: return "needs a MIG " + r.mig_profile + " instance";
    case SharingMode::kAuto: return fmt::format("needs {:g} of a GPU", r.gpu_milli / 1000.0);
  }
  return "";
}

// GPUs of a node the demand could use if the node were empty (healthy, and in MIG mode
// exactly when the demand is for a MIG slice).
int UsableGpus(const NodeUse& s, const Demand& d) {
  return d.mode == SharingMode::kMig ? s.healthy_mig : s.healthy - s.healthy_mig;
}

}  // namespace

Diagnosis Diagnose(const ClusterState& state, const Demand& d, bool with_text) {
  const auto& nodes = state.snapshot().nodes;
  Diagnosis out;
  std::string need = with_text ? NeedText(d) : std::string();
  if (d.type_mask == 0) {
    out.code = WaitCode::kNeverFits;
    out.text = need + "; no GPU type can serve it";
    return out;
  }
  bool type_present = false;
  for (size_t n = 0; n < nodes.size(); ++n) type_present = type_present || (d.type_mask >> state.node(n).type & 1);
  if (!type_present) {
    std::string names;
    for (GpuTypeId t : d.type_order) names += (names.empty() ? "" : ", ") + state.catalog().Get(t).name;
    out.code = WaitCode::kNeverFits;
    // Memory narrows the types a job may use: say so, or the user hunts for a type they never asked for.
    std::string memory =
        d.gpu_memory_mib > 0 ? fmt::format(" with {:g} GB of GPU memory", d.gpu_memory_mib / 1024.0) : std::string();
    if (with_text) out.text = fmt::format("{}{}; no node has type {}", need, memory, names);
    return out;
  }
  std::vector<GangShape> shapes = d.gang_shapes;
  if (d.mode != SharingMode::kExclusive) shapes = {{1, 1}};
  const int smallest_part = shapes.empty() ? d.total_gpus() : shapes.back().per_node;
  // Nodes turned away, per static filter (by index) and per capacity shortage.
  size_t filter_count = 0;
  const FilterPlugin* filters = StaticFilters(&filter_count);
  const FilterPlugin* node_state = nullptr;  // found by name once: not a string compare per node
  const FilterPlugin* containers = nullptr;
  for (size_t f = 0; f < filter_count; ++f) {
    if (std::string_view(filters[f].name) == "NodeState") node_state = &filters[f];
    if (std::string_view(filters[f].name) == "Containers") containers = &filters[f];
  }
  enum Shortage { kFewHealthy, kMigMode, kFewCpus, kLittleMemory, kFewFreeGpus, kNoRoom, kShortages };
  const char* shortage_text[kShortages] = {
      "too few healthy GPUs",
      d.mode == SharingMode::kMig ? "GPUs not in MIG mode" : "GPUs in MIG mode (only MIG jobs use them)",
      "too few free CPUs",
      "too little free memory",
      "too few free GPUs",
      "no GPU with room"};
  std::vector<int> by_filter(filter_count, 0);
  int shortages[kShortages] = {};
  // Nodes that pass the static filters, by usable GPUs, split by whether they are up.
  std::vector<int> up_sizes;
  std::vector<int> all_sizes;
  std::string container_why;                      // the first node's reason it cannot run containers
  const FilterPlugin* type_filter = &filters[0];  // GpuType: the cheapest test comes first
  for (size_t i = 0; i < nodes.size(); ++i) {
    int n = static_cast<int>(i);
    const NodeUse& s = state.node(n);
    if (s.gpu_count == 0 || !(d.type_mask >> s.type & 1)) {  // without touching the node itself
      by_filter[type_filter - filters]++;
      continue;
    }
    const FilterPlugin* failed = FailedStaticFilter(nodes[n], s, d);
    bool down = failed == node_state;
    if (failed && !down) {
      by_filter[failed - filters]++;
      if (with_text && container_why.empty() && failed == containers) {
        container_why = nodes[n].containers_problem.empty()
                            ? nodes[n].id
                            : fmt::format("{}: {}", nodes[n].id, nodes[n].containers_problem);
      }
      continue;
    }
    int usable = UsableGpus(s, d);
    if (usable < smallest_part) {
      shortages[s.healthy >= smallest_part ? kMigMode : kFewHealthy]++;
      continue;
    }
    all_sizes.push_back(usable);
    if (down) {
      by_filter[failed - filters]++;
      continue;
    }
    up_sizes.push_back(usable);
    if (s.free_cpus < d.cpus) {
      shortages[kFewCpus]++;
    } else if (s.free_memory < d.memory_mib) {
      shortages[kLittleMemory]++;
    } else {
      shortages[d.mode == SharingMode::kExclusive ? kFewFreeGpus : kNoRoom]++;
    }
  }
  std::string counts;
  auto count = [&](int c, const char* what) {
    if (!with_text) return;
    if (c > 0) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", c, what);
  };
  for (size_t f = 0; f < filter_count; ++f) {
    if (by_filter[f] > 0 && &filters[f] == containers) {
      count(by_filter[f], fmt::format("{} ({})", filters[f].failure, container_why).c_str());
    } else {
      count(by_filter[f], filters[f].failure);
    }
  }
  for (int k = 0; k < kShortages; ++k) count(shortages[k], shortage_text[k]);
  auto some_shape_fits = [&](const std::vector<int>& sizes) {
    for (const GangShape& shape : shapes) {
      int hosts = 0;
      for (int size : sizes) hosts += size >= shape.per_node ? 1 : 0;
      if (hosts >= shape.nodes) return true;
    }
    return false;
  };
  if (some_shape_fits(up_sizes)) {
    out.code = WaitCode::kNoCapacity;
    if (with_text) out.text = fmt::format("{}; none free now (0/{} nodes fit: {})", need, nodes.size(), counts);
  } else if (some_shape_fits(all_sizes)) {
    out.code = WaitCode::kNoSchedulableNode;
    if (with_text) out.text = fmt::format("{}; only drained or down nodes could hold it ({})", need, counts);
  } else {
    out.code = WaitCode::kNeverFits;
    if (with_text) out.text = fmt::format("{}; larger than any node can give ({})", need, counts);
  }
  return out;
}

const char* ToString(WaitCode c) {
  switch (c) {
    case WaitCode::kNoCapacity: return "no_capacity";
    case WaitCode::kBehindReservation: return "behind_reservation";
    case WaitCode::kStrictOrder: return "strict_order";
    case WaitCode::kNeverFits: return "never_fits";
    case WaitCode::kNoSchedulableNode: return "no_schedulable_node";
    case WaitCode::kNotExamined: return "not_examined";
    case WaitCode::kQuota: return "quota";
    case WaitCode::kHeld: return "held";
    case WaitCode::kPreempting: return "preempting";
  }
  return "?";
}

}  // namespace gantry
