// Inventory conversions.
#include "agent/inventory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <thread>

namespace gantry {

Expected<Node> NodeFromInventory(const std::string& node_id, const GpuInventory& inv, const GpuCatalog& catalog) {
  Node node;
  node.id = node_id;
  node.cpus = static_cast<int>(std::thread::hardware_concurrency());
  node.memory_mib = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / (1024 * 1024);
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
    // NVML gives each instance's profile, not its slot: place them in order as the model's
    // rules allow, which is where the driver puts instances created without a placement.
    std::vector<MigPlacement> layout;
    for (const MigDeviceInfo& m : info.mig_devices) {
      int profile = type->FindMigProfile(m.profile);
      if (profile < 0) continue;
      auto start = FindMigStart(*type, layout, profile);
      if (!start) continue;
      layout.push_back({profile, *start});
      g.mig_instances.push_back({layout.back(), m.uuid});
    }
    node.gpus.push_back(std::move(g));
  }
  if (Status s = ValidateNode(node, catalog); !s.ok()) return s;
  return node;
}

GpuInventory FakeInventory(const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  GpuInventory inv;
  inv.provider = "fake";
  inv.driver_version = "fake";
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
