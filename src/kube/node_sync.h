// Keeps Gantry's nodes in step with the cluster's Node objects (a node's name is its Gantry
// id): labels (GPU Feature Discovery's nvidia.com/gpu.product, gpu.count, mig.* and the
// rest) and NoSchedule/NoExecute taints reach the scheduler, and a cordoned or deleted Node
// drains its Gantry node. One watch of all Nodes (or those a label selector picks), from
// the controller that leads.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kube/watch_loop.h"
#include "state/kube_node_facts.h"

namespace gantry {

// A Node object's facts. Taints Kubernetes manages itself (node.kubernetes.io/*,
// node.cloudprovider.kubernetes.io/*: not ready, unreachable, the cordon's own),
// nvidia.com/gpu (which every GPU pod tolerates) and gantry.io/* (the taint that keeps other
// pods off Gantry's nodes) are left out; PreferNoSchedule is a preference, not a taint.
KubeNodeFacts NodeFacts(const nlohmann::json& node);

class NodeSync {
 public:
  // One Node changed (a watch event; deleted ones with `deleted` set).
  using Apply = std::function<void(const std::string& node, const KubeNodeFacts& facts)>;
  // Every Node there is, after a list: what is not in it is gone.
  using ApplyAll = std::function<void(const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes)>;
  // `selector`: a label selector (say "nvidia.com/gpu.present=true"), or empty for all.
  NodeSync(const KubeConfig& config, const std::string& selector, Apply apply, ApplyAll apply_all);
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }
  const WatchLoop& loop() const { return loop_; }

 private:
  void Listed(const std::vector<nlohmann::json>& items);
  void Changed(const std::string& type, const nlohmann::json& node);

  Apply apply_;
  ApplyAll apply_all_;
  WatchLoop loop_;
};

}  // namespace gantry
