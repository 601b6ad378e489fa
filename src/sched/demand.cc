// Compiling job requests into demands and shape keys.
#include "sched/demand.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace gantry {

namespace {

template <typename T>
void Append(std::string& out, const T& v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

}  // namespace

Demand CompileDemand(const JobSpec& spec, const GpuCatalog& catalog, const std::vector<int>& max_gpus_per_type) {
  Demand d;
  d.spec = &spec;
  const GpuRequest& r = spec.request;
  d.mode = r.sharing;
  d.cpus = r.cpus;
  d.memory_mib = r.memory_mib;
  d.gpu_memory_mib = r.gpu_memory_mib;
  d.gpu_mask = r.gpu_index_mask();
  d.mig_profile.fill(-1);
  uint64_t allowed = AllowedTypeMask(r, catalog);
  for (const GpuType& t : catalog.types()) {
    if ((allowed >> t.id & 1) && TypeCanServe(t, r)) {
      d.type_mask |= uint64_t{1} << t.id;
      if (r.sharing == SharingMode::kMig) d.mig_profile[t.id] = static_cast<int8_t>(t.FindMigProfile(r.mig_profile));
    }
  }
  // Preference: the job's listed order, or else cheapest first (ties by name for stability).
  if (r.prefer_listed_order && !r.gpu_types.empty()) {
    for (const std::string& name : r.gpu_types) {
      const GpuType* t = catalog.Find(name);
      if (t && (d.type_mask >> t->id & 1) &&
          std::find(d.type_order.begin(), d.type_order.end(), t->id) == d.type_order.end()) {
        d.type_order.push_back(t->id);
      }
    }
  } else {
    for (const GpuType& t : catalog.types()) {
      if (d.type_mask >> t.id & 1) d.type_order.push_back(t.id);
    }
    std::stable_sort(d.type_order.begin(), d.type_order.end(), [&](GpuTypeId a, GpuTypeId b) {
      return catalog.Get(a).price_on_demand < catalog.Get(b).price_on_demand;
    });
  }
  switch (r.sharing) {
    case SharingMode::kExclusive: {
      if (r.num_nodes > 0) {
        d.gang_shapes.push_back({r.num_nodes, r.gpus / r.num_nodes});
        break;
      }
      int widest = 0;
      for (GpuTypeId t : d.type_order) widest = std::max(widest, max_gpus_per_type[t]);
      // Fewest nodes first: 16 GPUs on 8-GPU nodes try 2x8, then 4x4, 8x2, 16x1.
      for (int nodes = 1; nodes <= r.gpus && d.gang_shapes.size() < 6; ++nodes) {
        if (r.gpus % nodes == 0 && r.gpus / nodes <= widest) d.gang_shapes.push_back({nodes, r.gpus / nodes});
      }
      break;
    }
    case SharingMode::kTimeSlice: d.milli = r.gpu_milli; break;
    case SharingMode::kAuto:  // MPS or time-slice by node: the share, and MPS threads if MPS
      d.milli = r.gpu_milli;
      d.mps_thread_percent = EffectiveMpsThreadPercent(r);
      break;
    case SharingMode::kMps:
      d.mps_thread_percent = EffectiveMpsThreadPercent(r);
      d.milli = d.mps_thread_percent * 10;
      break;
    case SharingMode::kMig: break;
  }
  return d;
}

int64_t ShareMemory(const Demand& d, const GpuType& t) {
  if (d.mode == SharingMode::kMps && d.gpu_memory_mib > 0) return d.gpu_memory_mib;  // auto: the fraction's
  return t.memory_mib * d.spec->request.gpu_milli / kMilliPerGpu;
}

void AppendShapeKey(const JobSpec& spec, bool spot_ok, std::string& key) {
  const GpuRequest& r = spec.request;
  struct Fixed {  // the numeric fields, zero-padded so equal requests give equal bytes
    int64_t gpu_memory_mib, memory_mib;
    int32_t gpus, num_nodes, gpu_milli, mps_thread_percent, cpus;
    uint8_t sharing, prefer_listed_order, container, pad;
  } fixed;
  std::memset(&fixed, 0, sizeof(fixed));
  fixed = {r.gpu_memory_mib,
           r.memory_mib,
           r.gpus,
           r.num_nodes,
           r.gpu_milli,
           r.mps_thread_percent,
           r.cpus,
           static_cast<uint8_t>(r.sharing),
           static_cast<uint8_t>(r.prefer_listed_order),
           static_cast<uint8_t>(spec.container.enabled()),
           0};
  Append(key, fixed);
  key += r.mig_profile;
  key += '\0';
  Append(key, r.gpu_index_mask());
  for (const std::string& t : r.gpu_types) key.append(t).push_back('\0');
  key += '\1';
  for (const auto& [k, v] : spec.node_selector) key.append(k).append("=").append(v).push_back('\0');
  key += '\1';
  for (const Taint& t : spec.tolerations) key.append(t.key).append("=").append(t.value).push_back('\0');
  key += spot_ok ? '\2' : '\3';  // spot nodes take preemptible work of preemptible classes only
}

std::string DescribeRequest(const JobSpec& spec) {
  const GpuRequest& r = spec.request;
  std::string pinned = r.gpu_indices.empty() ? "" : fmt::format(" of GPUs {}", fmt::join(r.gpu_indices, ","));
  switch (r.sharing) {
    case SharingMode::kExclusive:
      if (r.num_nodes > 1) return fmt::format("{} GPUs as {} nodes x {}", r.gpus, r.num_nodes, r.gpus / r.num_nodes);
      return (r.gpus == 1 ? "1 GPU" : fmt::format("{} GPUs", r.gpus)) + pinned;
    case SharingMode::kTimeSlice: return fmt::format("{:g} of a GPU (time-slice)", r.gpu_milli / 1000.0) + pinned;
    case SharingMode::kMps:
      return fmt::format("{:g} of a GPU (MPS, {}% threads)", r.gpu_milli / 1000.0, EffectiveMpsThreadPercent(r)) +
             pinned;
    case SharingMode::kMig: return "MIG " + r.mig_profile + pinned;
    case SharingMode::kAuto: return fmt::format("{:g} of a GPU", r.gpu_milli / 1000.0) + pinned;
  }
  return "?";
}

}  // namespace gantry
