// Node objects to Gantry node facts, from a list-and-watch of /api/v1/nodes.
#include "kube/node_sync.h"

#include <algorithm>

#include "core/kube_pod.h"

namespace gantry {

namespace {

// Taints that are not a Gantry job's business: Kubernetes' own lifecycle taints, the GPU
// taint every GPU workload tolerates, and gantry.io/* (what keeps other pods off Gantry's
// nodes: the agents tolerate it, Gantry's jobs need not).
bool NotForJobs(const std::string& key) {
  return key.rfind("node.kubernetes.io/", 0) == 0 || key.rfind("node.cloudprovider.kubernetes.io/", 0) == 0 ||
         key == "nvidia.com/gpu" || key.rfind("gantry.io/", 0) == 0;
}

std::string NameOf(const nlohmann::json& object) { return StringAt(ObjectAt(object, "metadata"), "name"); }

}  // namespace

KubeNodeFacts NodeFacts(const nlohmann::json& node) {
  KubeNodeFacts facts;
  const nlohmann::json& meta = ObjectAt(node, "metadata");
  for (const auto& [k, v] : ObjectAt(meta, "labels").items()) {
    if (v.is_string()) facts.labels[k] = v.get<std::string>();
  }
  const nlohmann::json& spec = ObjectAt(node, "spec");
  facts.cordoned = BoolAt(spec, "unschedulable");
  for (const nlohmann::json& t : ArrayAt(spec, "taints")) {
    std::string key = StringAt(t, "key"), effect = StringAt(t, "effect");
    if (key.empty() || NotForJobs(key) || (effect != "NoSchedule" && effect != "NoExecute")) continue;
    facts.taints.push_back({key, StringAt(t, "value")});
  }
  facts.deleted = meta.contains("deletionTimestamp");
  const nlohmann::json& status = ObjectAt(node, "status");
  const nlohmann::json& offered =
      ObjectAt(status, "allocatable").empty() ? ObjectAt(status, "capacity") : ObjectAt(status, "allocatable");
  auto whole = [&](const char* resource, int64_t unit) -> int64_t {
    if (!offered.contains(resource) || !offered[resource].is_string()) return 0;
    auto milli = QuantityMilli(offered[resource].get<std::string>());
    return milli ? *milli / 1000 / unit : 0;
  };
  facts.gpus = static_cast<int>(std::min<int64_t>(whole("nvidia.com/gpu", 1), 64));
  facts.cpus = static_cast<int>(std::min<int64_t>(whole("cpu", 1), 1 << 20));
  facts.memory_mib = whole("memory", 1024 * 1024);
  return facts;
}

NodeSync::NodeSync(const KubeConfig& config, const std::string& selector, Apply apply, ApplyAll apply_all)
    : apply_(std::move(apply)),
      apply_all_(std::move(apply_all)),
      loop_(config, "/api/v1/nodes", selector.empty() ? "" : "labelSelector=" + UrlEncode(selector),
            {[this](const std::vector<nlohmann::json>& items) { Listed(items); },
             [this](const std::string& type, const nlohmann::json& node) { Changed(type, node); }}) {}

void NodeSync::Listed(const std::vector<nlohmann::json>& items) {
  std::vector<std::pair<std::string, KubeNodeFacts>> all;
  for (const nlohmann::json& node : items) {
    std::string name = NameOf(node);
    if (!name.empty()) all.emplace_back(name, NodeFacts(node));
  }
  apply_all_(all);  // one batch for the controller, whose nodes not in it are gone
}

void NodeSync::Changed(const std::string& type, const nlohmann::json& node) {
  std::string name = NameOf(node);
  if (name.empty()) return;
  KubeNodeFacts facts = NodeFacts(node);
  if (type == "DELETED") facts.deleted = true;
  apply_(name, facts);
}

}  // namespace gantry
