// The controller with its Kubernetes settings, two replicas on one PostgreSQL as the
// Deployment runs them: leadership stays in the database, both are alive and ready (the
// probes), the Service's Endpoints hold the leader's address alone (the leader writes
// them, and writes them again when someone else did), and only the leader watches the
// Nodes; after a take-over the new leader does both.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "kube/kube_fixture.h"
#include "server/server_pair.h"

namespace gantry::testing {
namespace {

class KubeController : public OnKube {};

std::string LabelOn(const std::string& address, const std::string& key) {
  httplib::Client c(address);
  c.set_bearer_token_auth(kRootToken);
  nlohmann::json nodes = Json(c.Get("/v1/nodes"));
  for (const nlohmann::json& n : nodes.value("nodes", nlohmann::json::array())) {
    if (n.value("id", "") == "node-a" && n.contains("labels") && n["labels"].contains(key)) return n["labels"][key];
  }
  return "";
}

// The port the gantry Service's Endpoints send to (0: none).
int EndpointsPort(const ScratchKube& kube) {
  auto [status, ep] = kube.Api("GET", "/api/v1/namespaces/gantry-system/endpoints/gantry");
  if (status != 200 || !ep.contains("subsets") || ep["subsets"].size() != 1) return 0;
  const nlohmann::json& subset = ep["subsets"][0];
  if (subset["addresses"].size() != 1 || subset["addresses"][0].value("ip", "") != "10.0.0.5") return 0;
  // The pod, so that `kubectl port-forward pod/NAME` finds the leader (docs/KUBERNETES.md).
  if (subset["addresses"][0]["targetRef"].value("name", "") != "gantry-controller-0") return 0;
  if (subset["ports"].size() != 1 || subset["ports"][0].value("name", "") != "http") return 0;
  return subset["ports"][0].value("port", 0);
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

TEST_F(KubeController, LeadsThroughPostgresTheServiceSendsToTheLeaderAndItWatchesNodes) {
  std::string dir = TempPath("kube-controller");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/controller-token")
      << kube_.TokenFor("gantry-system", "gantry-controller", "https://kubernetes.default.svc");
  Pair p("kube-controller",
         {"--kube-api", kube_.url(), "--kube-ca", kube_.ca(), "--kube-token-file", dir + "/controller-token",
          "--kube-node-selector", "nvidia.com/gpu.present=true", "--node-timeout", "30", "--kube-service",
          "gantry-system/gantry", "--kube-pod-ip", "10.0.0.5", "--kube-pod-name", "gantry-controller-0"});
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  const std::string standby = StandbyAddress(p.b);
  ASSERT_FALSE(standby.empty());
  httplib::Client leader(p.a.address()), waiting(standby);
  EXPECT_EQ(leader.Get("/readyz")->status, 200);
  EXPECT_EQ(leader.Get("/livez")->status, 200);
  EXPECT_EQ(waiting.Get("/readyz")->status, 200) << "a Deployment of a leader and a standby is Available";
  EXPECT_EQ(Json(waiting.Get("/readyz"))["status"], "standby");
  EXPECT_EQ(waiting.Get("/livez")->status, 200);
  EXPECT_EQ(waiting.Get("/healthz")->status, 503);  // as on bare metal: a load balancer's check finds the leader
  // The Service's traffic goes to the leader alone.
  EXPECT_TRUE(Eventually([&] { return EndpointsPort(kube_) == PortOf(p.a.address()); }))
      << kube_.Api("GET", "/api/v1/namespaces/gantry-system/endpoints/gantry").second.dump();
  // An operator's re-apply (or anyone) that empties them: the leader writes them again.
  ASSERT_EQ(kube_.Api("PATCH", "/api/v1/namespaces/gantry-system/endpoints/gantry", {{"subsets", nullptr}}).first, 200);
  EXPECT_TRUE(Eventually([&] { return EndpointsPort(kube_) == PortOf(p.a.address()); }, 15));

  AgentProcess agent(p.a.dir(), "node-a", "1xH100-80GB");  // its config is the servers' (users.yaml's token)
  agent.Start(p.server_list());
  ASSERT_TRUE(Eventually([&] { return LabelOn(p.a.address(), "nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3"; }));
  // The standby watches nothing (its log says nothing of Kubernetes until it leads).
  EXPECT_EQ(ReadFileNoThrow(p.b.dir() + "/server.log").value_or("").find("kubernetes:"), std::string::npos);

  // The leader goes; the standby takes over, and its Node watch sees what changes next.
  p.a.Kill(SIGKILL);
  p.b.WaitReady(20);
  std::string out;
  ASSERT_EQ(kube_.Kubectl("label node node-a team=vision", &out), 0) << out;
  EXPECT_TRUE(Eventually([&] { return LabelOn(p.b.address(), "team") == "vision"; }, 15))
      << ReadFileNoThrow(p.b.dir() + "/server.log").value_or("");
  EXPECT_EQ(httplib::Client(p.b.address()).Get("/readyz")->status, 200);
  EXPECT_TRUE(Eventually([&] { return EndpointsPort(kube_) == PortOf(p.b.address()); }, 15))
      << "after the take-over the Service sends to the new leader";
}

}  // namespace
}  // namespace gantry::testing
