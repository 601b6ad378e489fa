// CheckAdmissible (engine.h): refuses at submission a job no node of the cluster, or of
// its elastic pools at their largest, could ever hold, naming the field.
#include <fmt/format.h>

#include <map>
#include <vector>

#include "sched/engine.h"

namespace gantry {

Status CheckAdmissible(const JobSpec& spec, const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  const GpuRequest& r = spec.request;
  uint64_t mask = AllowedTypeMask(r, catalog);
  int allowed_nodes = 0;
  int mig_nodes = 0;
  for (const Node& n : nodes) {
    if (n.gpus.empty() || !(mask >> n.gpu_type() & 1)) continue;
    ++allowed_nodes;
    for (const Gpu& g : n.gpus) {
      if (g.mig_enabled) {
        ++mig_nodes;
        break;
      }
    }
  }
  if (allowed_nodes == 0) {
    return Status::Invalid(r.gpu_types.empty() ? "gpus" : "gpu_types",
                           "no node in the cluster has an allowed GPU type");
  }
  if (r.sharing == SharingMode::kMig && mig_nodes == 0) {
    return Status::Invalid("mig_profile", "no node of an allowed type has GPUs in MIG mode");
  }
  if (r.sharing != SharingMode::kExclusive) return Status::Ok();
  // A gang runs on one GPU type: some type must have enough nodes and GPUs for it.
  std::map<GpuTypeId, std::vector<int>> sizes;  // type -> GPUs per node
  for (const Node& n : nodes) {
    if (!n.gpus.empty() && (mask >> n.gpu_type() & 1)) sizes[n.gpu_type()].push_back(static_cast<int>(n.gpus.size()));
  }
  std::string best;
  for (const auto& [type, per_node] : sizes) {
    int total = 0;
    for (int s : per_node) total += s;
    best += fmt::format("{}{}: {} nodes, {} GPUs", best.empty() ? "" : "; ", catalog.Get(type).name, per_node.size(),
                        total);
    for (int count = r.num_nodes > 0 ? r.num_nodes : 1; count <= r.gpus; ++count) {
      if (r.gpus % count != 0) continue;
      int hosts = 0;
      for (int s : per_node) hosts += s >= r.gpus / count ? 1 : 0;
      if (hosts >= count) return Status::Ok();
      if (r.num_nodes > 0) break;
    }
  }
  if (r.num_nodes > 0) {
    return Status::Invalid("nodes", fmt::format("no GPU type has {} nodes with {} GPUs each ({})", r.num_nodes,
                                                r.gpus / r.num_nodes, best));
  }
  return Status::Invalid("gpus", fmt::format("{} GPUs fit on no GPU type of the cluster ({})", r.gpus, best));
}

}  // namespace gantry
