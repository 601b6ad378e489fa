// From what a GPU provider sees to the node the scheduler sees, and back for fake GPUs.
#pragma once

#include <string>
#include <vector>

#include "core/node.h"
#include "protocol/gpu_readings.h"

namespace gantry {

// A node's CPUs and host memory, as its agent reports them.
struct NodeSize {
  int cpus = 0;
  int64_t memory_mib = 0;
};

// A node as the scheduler sees it: its GPUs (type from the product name through the
// catalog's aliases), MIG mode and instances, CPUs and memory. Errors name the GPU the
// catalog does not know.
Expected<Node> NodeFromInventory(const std::string& node_id, const GpuInventory& inventory, const GpuCatalog& catalog,
                                 NodeSize size);

// The scheduler's view of a GPU's MIG devices (their profile and slot).
std::vector<MigInstance> MigInstancesFromDevices(const GpuType& type, const std::vector<MigDeviceInfo>& devices);
// NVLink groups from the peers the provider read: connected GPUs share a group.
void AssignNvLinkGroups(const GpuInventory& inventory, Node& node);

// What the fake provider reports for fake nodes.
GpuInventory FakeInventory(const std::vector<Node>& nodes, const GpuCatalog& catalog);

}  // namespace gantry
