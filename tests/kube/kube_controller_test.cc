// The controller with its Kubernetes settings, two replicas on one PostgreSQL as the
// Deployment runs them: leadership stays in the database, only the leader is ready (the
// Service's readiness probe) while the standby is alive (the liveness probe), and only the
// leader watches the Nodes; after a take-over the new leader does.
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

TEST_F(KubeController, LeadsThroughPostgresOnlyTheLeaderIsReadyAndWatchesNodes) {
  std::string dir = TempPath("kube-controller");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/controller-token")
      << kube_.TokenFor("gantry-system", "gantry-controller", "https://kubernetes.default.svc");
  Pair p("kube-controller",
         {"--kube-api", kube_.url(), "--kube-ca", kube_.ca(), "--kube-token-file", dir + "/controller-token",
          "--kube-node-selector", "nvidia.com/gpu.present=true", "--node-timeout", "30"});
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  const std::string standby = StandbyAddress(p.b);
  ASSERT_FALSE(standby.empty());
  httplib::Client leader(p.a.address()), waiting(standby);
  EXPECT_EQ(leader.Get("/readyz")->status, 200);
  EXPECT_EQ(leader.Get("/livez")->status, 200);
  EXPECT_EQ(waiting.Get("/readyz")->status, 503);
  EXPECT_EQ(waiting.Get("/livez")->status, 200);
  EXPECT_EQ(waiting.Get("/healthz")->status, 503);  // as on bare metal: a load balancer's check finds the leader

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
}

}  // namespace
}  // namespace gantry::testing
