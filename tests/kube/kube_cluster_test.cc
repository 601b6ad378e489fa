// Gantry's Kubernetes install against a real API server (kube-apiserver 1.20 on etcd,
// scripts/kube-scratch.sh): every manifest applies server-side, and the controller, run
// with the controller service account's token and its RBAC, sees the cluster's Nodes:
// labels, taints, cordons and deletions reach Gantry's nodes through its watch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "kube/kube_fixture.h"

namespace gantry::testing {
namespace {

class KubeManifests : public OnKube {};
class KubeNodes : public OnKube {};

namespace fs = std::filesystem;

TEST_F(KubeManifests, EveryObjectAppliesServerSideAndIsWhatTheDocsSay) {
  // The production overlay too (its Secrets are the operator's: referenced, not made).
  std::string out;
  ASSERT_EQ(kube_.Kubectl(fmt::format("kustomize {}/deploy/kubernetes/overlays/production", GANTRY_SOURCE_DIR), &out),
            0)
      << out;
  EXPECT_EQ(out.find("kind: Secret"), std::string::npos);

  auto [ds_status, ds] = kube_.Api("GET", "/apis/apps/v1/namespaces/gantry-system/daemonsets/gantry-agent");
  ASSERT_EQ(ds_status, 200) << ds.dump();
  const nlohmann::json& pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
  EXPECT_EQ(pod["serviceAccountName"], "gantry-agent");
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  EXPECT_EQ(pod["runtimeClassName"], "nvidia");
  const nlohmann::json& agent = pod["containers"][0];
  EXPECT_EQ(agent["securityContext"].value("privileged", true), false);
  EXPECT_EQ(agent["securityContext"]["capabilities"]["drop"], nlohmann::json::array({"ALL"}));
  bool projected = false;
  for (const nlohmann::json& v : pod["volumes"]) {
    if (!v.contains("projected")) continue;
    const nlohmann::json& sa = v["projected"]["sources"][0]["serviceAccountToken"];
    // Root's alone (0400): jobs run in the agent's container under their teams' accounts.
    projected = sa["audience"] == "gantry" && sa["expirationSeconds"] == 3600 && v["projected"]["defaultMode"] == 0400;
  }
  EXPECT_TRUE(projected) << pod.dump();

  auto [dep_status, dep] = kube_.Api("GET", "/apis/apps/v1/namespaces/gantry-system/deployments/gantry-controller");
  ASSERT_EQ(dep_status, 200);
  EXPECT_EQ(dep["spec"]["replicas"], 2);
  const nlohmann::json& controller = dep["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(controller["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(controller["livenessProbe"]["httpGet"]["path"], "/livez");
  EXPECT_TRUE(controller["resources"].contains("requests"));
  const nlohmann::json service = kube_.Api("GET", "/api/v1/namespaces/gantry-system/services/gantry").second;
  // /metrics needs a token: no annotation invites a scraper that would send none (or send
  // its token to every annotated pod).
  EXPECT_FALSE(service["metadata"].value("annotations", nlohmann::json::object()).contains("prometheus.io/scrape"))
      << service.dump();
  EXPECT_NE(std::find(controller["args"].begin(), controller["args"].end(), "--metrics-need-token"),
            controller["args"].end());
  // No selector: the leader writes its address into the Endpoints object the manifests make.
  EXPECT_FALSE(service["spec"].contains("selector")) << service.dump();
  EXPECT_EQ(kube_.Api("GET", "/api/v1/namespaces/gantry-system/endpoints/gantry").first, 200);
  const nlohmann::json args = controller["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--kube-service=gantry"), args.end()) << args.dump();
  EXPECT_EQ(controller["env"][1]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
  EXPECT_EQ(controller["env"][2]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
  EXPECT_EQ(dep["spec"]["strategy"]["type"], "Recreate") << "a new server migrates the schema: never beside an old one";
  EXPECT_EQ(kube_.Api("GET", "/api/v1/namespaces/gantry-system")
                .second["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "privileged");
  EXPECT_EQ(kube_.Api("GET", "/api/v1/namespaces/gantry-system/configmaps/gantry-grafana-dashboard").first, 200);
  // The controller's configuration starts as the project's defaults (config/).
  for (const char* f : {"gpu_types.yaml", "health.yaml", "scheduler_config.yaml", "team_quotas.yaml"}) {
    EXPECT_EQ(ReadFileNoThrow(fmt::format("{}/config/{}", GANTRY_SOURCE_DIR, f)),
              ReadFileNoThrow(fmt::format("{}/deploy/kubernetes/base/config/{}", GANTRY_SOURCE_DIR, f)))
        << f << ": deploy/kubernetes/base/config/ differs from config/";
  }
  // The API server refuses what is not valid (the checks above are its, not kubectl's).
  std::ofstream(kube_.dir() + "/bad.yaml")
      << "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\n"
         "spec: {replicas: 1, selector: {matchLabels: {a: b}}, template: "
         "{metadata: {labels: {a: c}}, spec: {containers: [{name: x, image: y}]}}}\n";
  EXPECT_NE(kube_.Kubectl("apply --server-side -n gantry-system -f " + kube_.dir() + "/bad.yaml", &out), 0) << out;
}

// Gantry's view of a node once `ok` says yes (or as it is after 10 s).
nlohmann::json NodeWhen(const ServerProcess& server, const std::string& id,
                        const std::function<bool(const nlohmann::json&)>& ok) {
  nlohmann::json node;
  Eventually([&] {
    nlohmann::json nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
    for (const nlohmann::json& n : nodes.value("nodes", nlohmann::json::array())) {
      if (n.value("id", "") == id) node = n;
    }
    return !node.is_null() && ok(node);
  });
  return node;
}

TEST_F(KubeNodes, LabelsTaintsCordonAndDeletionReachGantrysNode) {
  std::string dir = TempPath("kube-nodes");
  fs::remove_all(dir);
  ServerProcess server(dir, "");
  StartOnKube(server, kube_, dir);
  AgentProcess agent(dir, "node-a", "1xH100-80GB");  // users.yaml's node token: the Node view is the controller's
  agent.Start(server.address());
  auto label = [](const nlohmann::json& n, const std::string& k) {
    return n.contains("labels") && n["labels"].contains(k) ? n["labels"][k].get<std::string>() : "";
  };
  nlohmann::json n = NodeWhen(server, "node-a", [&](const nlohmann::json& x) {
    return label(x, "nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3" && x.value("state", "") == "up";
  });
  ASSERT_EQ(label(n, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3") << n.dump();

  std::string out;
  ASSERT_EQ(kube_.Kubectl("label node node-a team=vision nvidia.com/gpu.count=8 --overwrite", &out), 0) << out;
  ASSERT_EQ(kube_.Kubectl("taint node node-a dedicated=inference:NoSchedule", &out), 0) << out;
  n = NodeWhen(server, "node-a", [&](const nlohmann::json& x) {
    return label(x, "team") == "vision" && x.value("taints", nlohmann::json::array()).size() == 1;
  });
  EXPECT_EQ(label(n, "nvidia.com/gpu.count"), "8") << n.dump();
  ASSERT_EQ(n.value("taints", nlohmann::json::array()).size(), 1u) << n.dump();
  EXPECT_EQ(n["taints"][0], "dedicated=inference");
  // A label removed in Kubernetes goes; a PreferNoSchedule taint is no taint here.
  ASSERT_EQ(kube_.Kubectl("label node node-a team-", &out), 0) << out;
  ASSERT_EQ(kube_.Kubectl("taint node node-a dedicated- spot=yes:PreferNoSchedule", &out), 0) << out;
  n = NodeWhen(server, "node-a", [&](const nlohmann::json& x) {
    return label(x, "team").empty() && x.value("taints", nlohmann::json::array()).empty();
  });
  EXPECT_EQ(label(n, "team"), "") << n.dump();
  EXPECT_TRUE(n.value("taints", nlohmann::json::array()).empty()) << n.dump();

  // Cordoned: drained; uncordoned: back. An admin's drain is not undone by an uncordon.
  ASSERT_EQ(kube_.Kubectl("cordon node-a", &out), 0) << out;
  n = NodeWhen(server, "node-a", [](const nlohmann::json& x) { return x.value("state", "") == "drained"; });
  EXPECT_EQ(n.value("state", ""), "drained") << n.dump();
  ASSERT_EQ(kube_.Kubectl("uncordon node-a", &out), 0) << out;
  n = NodeWhen(server, "node-a", [](const nlohmann::json& x) { return x.value("state", "") == "up"; });
  EXPECT_EQ(n.value("state", ""), "up") << n.dump();
  ASSERT_EQ(server.Client(kRootToken).Post("/v1/nodes/node-a/drain", "", "text/plain")->status, 200);
  ASSERT_EQ(kube_.Kubectl("cordon node-a", &out), 0) << out;
  ASSERT_EQ(kube_.Kubectl("uncordon node-a", &out), 0) << out;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(NodeWhen(server, "node-a", [](const nlohmann::json&) { return true; }).value("state", ""), "drained");
  ASSERT_EQ(server.Client(kRootToken).Post("/v1/nodes/node-a/undrain", "", "text/plain")->status, 200);

  // Deleted: drained, saying why.
  ASSERT_EQ(kube_.Kubectl("delete node node-a", &out), 0) << out;
  n = NodeWhen(server, "node-a", [&](const nlohmann::json& x) { return x.value("state", "") == "drained"; });
  EXPECT_EQ(n.value("state", ""), "drained") << n.dump();
  EXPECT_EQ(label(n, "gantry.io/kube-drained"), "deleted") << n.dump();
}

}  // namespace
}  // namespace gantry::testing
