// Inventory conversions.
#include "protocol/inventory.h"

#include <fmt/format.h>

#include <optional>

namespace gantry {

std::vector<MigInstance> MigInstancesFromDevices(const GpuType& type, const std::vector<MigDeviceInfo>& devices) {
  // Instances whose slot the provider read keep it; the others go where the model's rules
  // allow, in order, which is where the driver puts instances made without a placement.
  std::vector<MigPlacement> layout;
  std::vector<MigInstance> out;
  for (int pass = 0; pass < 2; ++pass) {
    for (const MigDeviceInfo& m : devices) {
      int profile = type.FindMigProfile(m.profile);
      if (profile < 0 || (pass == 0) != (m.start >= 0)) continue;
      std::optional<int> start = m.start >= 0 ? std::optional<int>(m.start) : FindMigStart(type, layout, profile);
      if (!start) continue;
      if (m.start >= 0) {
        // A slot the model's rules refuse (a start past the GPU's slices, an overlap) is a
        // bad report, not the GPU: left out, so nothing invalid is kept or persisted.
        std::vector<MigPlacement> trial = layout;
        trial.push_back({profile, *start});
        if (!MigLayoutValid(type, trial)) continue;
      }
      layout.push_back({profile, *start});
      out.push_back({layout.back(), m.uuid});
    }
  }
  return out;
}

void AssignNvLinkGroups(const GpuInventory& inv, Node& node) {
  // GPUs joined by NVLink (directly or through others) share a group; a GPU with no link
  // is a group of its own. Without any link readable, every GPU stays in group 0.
  bool any = false;
  for (const GpuInfo& info : inv.gpus) any = any || !info.nvlink_peers.empty();
  if (!any || inv.gpus.size() != node.gpus.size()) return;
  std::vector<int> group(inv.gpus.size(), -1);
  int groups = 0;
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    if (group[i] >= 0) continue;
    std::vector<size_t> todo{i};
    group[i] = groups;
    while (!todo.empty()) {
      size_t at = todo.back();
      todo.pop_back();
      for (int peer : inv.gpus[at].nvlink_peers) {
        for (size_t j = 0; j < inv.gpus.size(); ++j) {
          if (inv.gpus[j].index == peer && group[j] < 0) {
            group[j] = groups;
            todo.push_back(j);
          }
        }
      }
    }
    ++groups;
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) node.gpus[i].nvlink_group = group[i];
}

Expected<Node> NodeFromInventory(const std::string& node_id, const GpuInventory& inv, const GpuCatalog& catalog,
                                 NodeSize size) {
  Node node;
  node.id = node_id;
  node.cpus = size.cpus;
  node.memory_mib = size.memory_mib;
  node.mps = inv.mps;
  node.containers = inv.containers;
  node.containers_problem = inv.containers_problem;
  node.labels["gantry.io/gpu-provider"] = inv.provider;
  if (!inv.driver_version.empty()) node.labels["gantry.io/driver"] = inv.driver_version;
  for (const GpuInfo& info : inv.gpus) {
    const GpuType* type = catalog.Find(info.name);
    if (!type) {
      return Status::Invalid("gpu_types", fmt::format("GPU {} is a '{}', which config/gpu_types.yaml does not list "
                                                      "(add it, or its name as an alias)",
                                                      info.index, info.name));
    }
    Gpu g;
    g.index = static_cast<int>(node.gpus.size());
    g.uuid = info.uuid;
    g.type = type->id;
    g.mig_enabled = info.mig_enabled;
    g.mig_instances = MigInstancesFromDevices(*type, info.mig_devices);
    node.gpus.push_back(std::move(g));
  }
  AssignNvLinkGroups(inv, node);
  if (Status s = ValidateNode(node, catalog); !s.ok()) return s;
  return node;
}

GpuInventory FakeInventory(const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  GpuInventory inv;
  inv.provider = "fake";
  inv.driver_version = "fake";
  inv.mps = true;  // fake nodes model an ordinary node, which can run MPS
  for (const Node& n : nodes) {
    for (const Gpu& g : n.gpus) {
      const GpuType& type = catalog.Get(g.type);
      GpuInfo info;
      info.index = g.index;
      info.uuid = g.uuid;
      info.name = type.name;
      info.pci_bus_id = fmt::format("00000000:{:02X}:00.0", g.index + 1);
      info.memory_total_mib = type.memory_mib;
      info.mig_enabled = g.mig_enabled;
      inv.gpus.push_back(std::move(info));
    }
  }
  return inv;
}

}  // namespace gantry
