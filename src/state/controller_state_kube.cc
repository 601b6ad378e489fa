// Kubernetes' view of nodes laid over the agents' (ControllerState::ApplyKubeNode).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "state/controller_state.h"

namespace gantry {

namespace {

// What a node had from Kubernetes last time, so the next facts replace it: the label keys,
// and the taints (key=value), each list comma-separated.
constexpr const char* kKubeLabelsKey = "gantry.io/kube-labels";
constexpr const char* kKubeTaintsKey = "gantry.io/kube-taints";

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0, end; at < list.size(); at = end + 1) {
    end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    out.push_back(list.substr(at, end - at));
  }
  return out;
}

bool GantryLabel(const std::string& key) { return key.rfind("gantry.io/", 0) == 0; }

}  // namespace

void ControllerState::ApplyKubeNode(const std::string& node_id, const KubeNodeFacts& facts) {
  auto known = kube_nodes_.find(node_id);
  if (known != kube_nodes_.end() && known->second == facts) return;
  kube_nodes_[node_id] = facts;
  int n = nodes_.IndexOf(node_id);
  if (n < 0 && pod_link_ && facts.gpus > 0 && !facts.deleted) {
    AddKubeOnlyNode(node_id, facts);  // no agent there (yet): a node for pods
    return;
  }
  if (n >= 0) OverlayKubeFacts(n);
}

void ControllerState::ApplyKubeNodes(const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes) {
  std::set<std::string> listed;
  for (const auto& [id, facts] : nodes) {
    listed.insert(id);
    ApplyKubeNode(id, facts);
  }
  KubeNodeFacts deleted;
  deleted.deleted = true;
  std::vector<std::string> gone;
  for (const auto& [id, facts] : kube_nodes_) {
    if (!listed.count(id) && !facts.deleted) gone.push_back(id);
  }
  for (const Node& node : snap_.nodes) {
    bool known_to_kube = node.labels.count(kKubeLabelsKey) || node.labels.count(kKubeDrainLabel);
    if (known_to_kube && !listed.count(node.id) && !kube_nodes_.count(node.id)) gone.push_back(node.id);
  }
  for (const std::string& id : gone) ApplyKubeNode(id, deleted);
}

void ControllerState::OverlayKubeFacts(int n) {
  Node& node = snap_.nodes[n];
  auto it = kube_nodes_.find(node.id);
  if (it == kube_nodes_.end()) return;
  const KubeNodeFacts& facts = it->second;
  // The labels and taints Kubernetes gave last time go; its present ones come (no label of
  // Gantry's own). The node's other taints (its agent's, an admin's) stay.
  if (auto keys = node.labels.find(kKubeLabelsKey); keys != node.labels.end()) {
    for (const std::string& k : SplitList(keys->second)) node.labels.erase(k);
  }
  if (auto before = node.labels.find(kKubeTaintsKey); before != node.labels.end()) {
    for (const std::string& kv : SplitList(before->second)) {
      size_t eq = kv.find('=');
      Taint old{kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1)};
      node.taints.erase(std::remove(node.taints.begin(), node.taints.end(), old), node.taints.end());
    }
  }
  node.labels.erase(kKubeLabelsKey);
  node.labels.erase(kKubeTaintsKey);
  std::string keys, taints;
  for (const auto& [k, v] : facts.labels) {
    // Labels Gantry gives a meaning to are its own: gantry.io/*, a node's pool (which pool
    // tokens may speak for it) and the label pricing reads the pool from.
    if (GantryLabel(k) || k == "pool" || k == options_.pricing.pool_label) continue;
    node.labels[k] = v;
    keys += (keys.empty() ? "" : ",") + k;
  }
  for (const Taint& t : facts.taints) {
    if (std::find(node.taints.begin(), node.taints.end(), t) == node.taints.end()) node.taints.push_back(t);
    taints += (taints.empty() ? "" : ",") + t.key + "=" + t.value;
  }
  if (!keys.empty()) node.labels[kKubeLabelsKey] = keys;
  if (!taints.empty()) node.labels[kKubeTaintsKey] = taints;
  // Cordoned or deleted: drained (jobs finish, none start) with that reason; uncordoned:
  // back in service, if it was Kubernetes that drained it.
  bool kube_drained = node.labels.count(kKubeDrainLabel) > 0;
  bool out = facts.cordoned || facts.deleted;
  std::string reason = facts.deleted ? "deleted in Kubernetes" : "cordoned in Kubernetes";
  if (out && node.state == NodeState::kUp) {
    bool busy = false;
    for (const RunningJob& r : snap_.running) {
      for (const NodeShare& ns : r.placement.nodes) busy = busy || ns.node == n;
    }
    node.state = busy ? NodeState::kDraining : NodeState::kDrained;
    node.labels[kKubeDrainLabel] = facts.deleted ? "deleted" : "cordoned";
    NodeEvent(node.id, "drained", {{"gpu", -1}, {"by", "kubernetes"}, {"reason", reason}});
  } else if (out && kube_drained) {
    node.labels[kKubeDrainLabel] = facts.deleted ? "deleted" : "cordoned";
  } else if (!out && kube_drained) {
    node.labels.erase(kKubeDrainLabel);
    if (node.state == NodeState::kDraining || node.state == NodeState::kDrained) {
      node.state = NodeState::kUp;
      NodeEvent(node.id, "undrained", {{"gpu", -1}, {"by", "kubernetes"}, {"reason", "uncordoned in Kubernetes"}});
    }
  }
  PersistNode(n);
  dirty_ = true;
}

}  // namespace gantry
