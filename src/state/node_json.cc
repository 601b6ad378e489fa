// Node documents.
#include "state/node_json.h"

#include <fmt/format.h>

namespace gantry {

namespace {
constexpr const char* kNodeStates[] = {"up", "draining", "drained", "down"};
}

nlohmann::json NodeToDoc(const Node& node, const GpuCatalog& catalog) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const Gpu& g : node.gpus) {
    const GpuType& type = catalog.Get(g.type);
    nlohmann::json mig = nlohmann::json::array();
    for (const MigInstance& m : g.mig_instances) {
      mig.push_back(
          {{"profile", type.mig_profiles[m.placement.profile].name}, {"start", m.placement.start}, {"uuid", m.uuid}});
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"type", type.name},
                    {"healthy", g.health == GpuHealth::kHealthy},
                    {"fenced", g.fenced},
                    {"nvlink_group", g.nvlink_group},
                    {"mig_enabled", g.mig_enabled},
                    {"mig_instances", mig}});
  }
  nlohmann::json taints = nlohmann::json::array();
  for (const Taint& t : node.taints) taints.push_back(t.value.empty() ? t.key : t.key + "=" + t.value);
  return {{"id", node.id},
          {"state", kNodeStates[static_cast<int>(node.state)]},
          {"cpus", node.cpus},
          {"memory_mib", node.memory_mib},
          {"labels", node.labels},
          {"taints", taints},
          {"mps", node.mps},
          {"containers", node.containers},
          {"containers_problem", node.containers_problem},
          {"gpus", gpus},
          {"address", node.address()},
          {"ports", fmt::format("{}-{}", node.network.port_first, node.network.port_last)}};
}

Expected<Node> NodeFromDoc(const nlohmann::json& doc, const GpuCatalog& catalog) {
  try {
    Node n;
    n.id = doc.at("id").get<std::string>();
    std::string state = doc.at("state").get<std::string>();
    bool known = false;
    for (int i = 0; i < 4; ++i) {
      if (state == kNodeStates[i]) {
        n.state = static_cast<NodeState>(i);
        known = true;
      }
    }
    if (!known) return Status::Invalid("state", "unknown node state '" + state + "'");
    n.cpus = doc.at("cpus").get<int>();
    n.memory_mib = doc.at("memory_mib").get<int64_t>();
    n.labels = doc.at("labels").get<std::map<std::string, std::string>>();
    n.mps = doc.value("mps", false);
    n.containers = doc.value("containers", true);
    n.containers_problem = doc.value("containers_problem", "");
    if (doc.value("address", n.id) != n.id) n.network.address = doc["address"].get<std::string>();
    if (doc.contains("ports"))
      ParsePortRange(doc["ports"].get<std::string>(), &n.network.port_first, &n.network.port_last);
    for (const auto& t : doc.at("taints")) {
      std::string text = t.get<std::string>();
      size_t eq = text.find('=');
      n.taints.push_back(eq == std::string::npos ? Taint{text, ""} : Taint{text.substr(0, eq), text.substr(eq + 1)});
    }
    for (const auto& gj : doc.at("gpus")) {
      Gpu g;
      g.index = gj.at("index").get<int>();
      g.uuid = gj.at("uuid").get<std::string>();
      const GpuType* type = catalog.Find(gj.at("type").get<std::string>());
      if (!type) return Status::Invalid("gpus.type", "unknown GPU type " + gj.at("type").get<std::string>());
      g.type = type->id;
      g.health = gj.at("healthy").get<bool>() ? GpuHealth::kHealthy : GpuHealth::kUnhealthy;
      g.fenced = gj.at("fenced").get<bool>();
      g.nvlink_group = gj.at("nvlink_group").get<int>();
      g.mig_enabled = gj.at("mig_enabled").get<bool>();
      for (const auto& m : gj.at("mig_instances")) {
        int profile = type->FindMigProfile(m.at("profile").get<std::string>());
        if (profile < 0) return Status::Invalid("gpus.mig_instances", "unknown MIG profile");
        g.mig_instances.push_back({{profile, m.at("start").get<int>()}, m.at("uuid").get<std::string>()});
      }
      n.gpus.push_back(std::move(g));
    }
    if (Status s = ValidateNode(n, catalog); !s.ok()) return s;
    return n;
  } catch (const std::exception& e) {
    return Status::Invalid("node", std::string("malformed node document: ") + e.what());
  }
}

}  // namespace gantry
