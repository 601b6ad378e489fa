// What a Kubernetes Node object says of a Gantry node (the node's name is its id): its
// labels (GPU Feature Discovery's nvidia.com/gpu.product, gpu.count, mig.strategy, zones),
// its hard taints, and whether it is cordoned or deleted. kube/node_sync.h reads them; the
// controller lays them over what the node's agent reports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/node.h"

namespace gantry {

struct KubeNodeFacts {
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;  // NoSchedule and NoExecute ones
  bool cordoned = false;      // spec.unschedulable
  bool deleted = false;       // the Node object is gone
  // What the kubelet offers pods there (status.allocatable): nvidia.com/gpu from the device
  // plugin, CPUs and memory. A node with GPUs and no Gantry agent becomes a Gantry node of
  // its own when Gantry schedules pods (ControllerState::ApplyKubeNode).
  int gpus = 0;
  int cpus = 0;
  int64_t memory_mib = 0;
  bool operator==(const KubeNodeFacts&) const = default;
};

// The label a node drained by Kubernetes carries (so uncordoning returns it to service,
// across restarts, and never undoes an admin's drain).
inline constexpr const char* kKubeDrainLabel = "gantry.io/kube-drained";

}  // namespace gantry
