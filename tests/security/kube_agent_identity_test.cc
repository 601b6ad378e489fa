// Node agents on Kubernetes register with their pod's projected service-account token,
// checked by the API server (TokenReview) and the pod it is bound to: such a token speaks
// for its pod's node and no other. The attacks: another node's id, a token of another
// namespace's account of the same name, the agents' token for another audience, a token
// bound to no pod, a pod that is gone, a JWT-shaped forgery, and a user's token. And the
// controller's own account, which writes the leader's address into its Service's
// Endpoints: a compromised controller may move that one Service and change no pod (the
// privileged agents' pods live in its namespace) and no other Service.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "kube/kube_fixture.h"

namespace gantry::testing {
namespace {

class KubeAgentIdentity : public OnKube {};

nlohmann::json Registration(const std::string& node) {
  return {
      {"node_id", node},
      {"inventory",
       {{"gpus",
         {{{"index", 0}, {"uuid", "GPU-" + node}, {"name", "NVIDIA H100 80GB HBM3"}, {"memory_total_mib", 81559}}}}}}};
}

httplib::Result Register(const ServerProcess& server, const std::string& token, const std::string& node) {
  auto c = server.Client(token.c_str());
  return c.Post("/v1/agent/register", Registration(node).dump(), "application/json");
}

TEST_F(KubeAgentIdentity, APodsTokenRegistersItsNodeAndNoOther) {
  EXPECT_EQ(kube_.Api("POST", "/api/v1/nodes", GpuNode("node-b")).first, 201);  // node-a is the fixture's
  nlohmann::json pod_a = AgentPod(kube_, "gantry-system", "gantry-agent-a", "node-a");
  std::string token_a = kube_.TokenFor("gantry-system", "gantry-agent", "gantry", pod_a);
  ASSERT_FALSE(token_a.empty());

  std::string dir = TempPath("kube-agent-identity");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  StartOnKube(server, kube_, dir);

  // Its own node: registered.
  auto own = Register(server, token_a, "node-a");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
  // Another node's id with it: refused, and audited.
  auto other = Register(server, token_a, "node-b");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403) << other->body;

  // An account of the same name in another namespace, its pod on node-b.
  ASSERT_EQ(kube_
                .Api("POST", "/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "intruder"}}}})
                .first,
            201);
  ASSERT_EQ(kube_
                .Api("POST", "/api/v1/namespaces/intruder/serviceaccounts",
                     {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gantry-agent"}}}})
                .first,
            201);
  nlohmann::json pod_x = AgentPod(kube_, "intruder", "gantry-agent-x", "node-b");
  auto foreign = Register(server, kube_.TokenFor("intruder", "gantry-agent", "gantry", pod_x), "node-b");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 401) << foreign->body;
  EXPECT_NE(foreign->body.find("not the node agents'"), std::string::npos) << foreign->body;

  // The agents' own account, but a token for the API server's audience, or bound to no pod.
  auto audience = Register(
      server, kube_.TokenFor("gantry-system", "gantry-agent", "https://kubernetes.default.svc", pod_a), "node-a");
  ASSERT_TRUE(audience);
  EXPECT_EQ(audience->status, 401) << audience->body;
  auto unbound = Register(server, kube_.TokenFor("gantry-system", "gantry-agent", "gantry"), "node-a");
  ASSERT_TRUE(unbound);
  EXPECT_EQ(unbound->status, 401) << unbound->body;
  EXPECT_NE(unbound->body.find("bound to no pod"), std::string::npos) << unbound->body;

  // A pod that is gone: its token no longer registers anything (the API server says so).
  nlohmann::json pod_b = AgentPod(kube_, "gantry-system", "gantry-agent-b", "node-b");
  std::string token_b = kube_.TokenFor("gantry-system", "gantry-agent", "gantry", pod_b);
  EXPECT_EQ(kube_.Api("DELETE", "/api/v1/namespaces/gantry-system/pods/gantry-agent-b?gracePeriodSeconds=0").first,
            200);
  for (int i = 0; i < 50 && kube_.Api("GET", "/api/v1/namespaces/gantry-system/pods/gantry-agent-b").first != 404;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto gone = Register(server, token_b, "node-b");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 401) << gone->body;

  // A forgery shaped like a JWT, and a user's token on the agents' path.
  auto forged = Register(server, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlLWIifQ.c2lnbmF0dXJl", "node-b");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 401);
  auto user = Register(server, kAliceToken, "node-b");
  ASSERT_TRUE(user);
  EXPECT_EQ(user->status, 403);

  // Only node-a ever registered.
  nlohmann::json nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
  ASSERT_EQ(nodes["nodes"].size(), 1u) << nodes.dump();
  EXPECT_EQ(nodes["nodes"][0]["id"], "node-a");
}

// A real agent process reads its token from the projected file, as the DaemonSet runs it,
// and reads it again when the kubelet rotates it: after a rotation to a token of its new
// pod and the old pod's deletion, its reports still go through (with a stale token they
// would be refused, and the refusals audited).
TEST_F(KubeAgentIdentity, AnAgentRegistersWithItsTokenFileAndFollowsItsRotation) {
  nlohmann::json first = AgentPod(kube_, "gantry-system", "gantry-agent-1", "node-a");
  std::string dir = TempPath("kube-agent-token-file");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  StartOnKube(server, kube_, dir, {"--kube-token-cache", "0.5"});
  const std::string token_file = dir + "/agent-token";
  std::ofstream(token_file) << kube_.TokenFor("gantry-system", "gantry-agent", "gantry", first) << "\n";
  AgentProcess agent(dir, "node-a", "1xH100-80GB", {"--token-file", token_file});
  agent.Start(server.address());
  auto up = [&] {
    nlohmann::json nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
    return nodes["nodes"].size() == 1 && nodes["nodes"][0].value("state", "") == "up";
  };
  for (int i = 0; i < 100 && !up(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(up()) << ReadFileNoThrow(dir + "/agent-node-a.log").value_or("");
  // The kubelet's rotation (a new file moved into place), and the first pod gone.
  nlohmann::json second = AgentPod(kube_, "gantry-system", "gantry-agent-2", "node-a");
  std::ofstream(token_file + ".new") << kube_.TokenFor("gantry-system", "gantry-agent", "gantry", second) << "\n";
  std::filesystem::rename(token_file + ".new", token_file);
  EXPECT_EQ(kube_.Api("DELETE", "/api/v1/namespaces/gantry-system/pods/gantry-agent-1?gracePeriodSeconds=0").first,
            200);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // reports every 0.3 s, each checked again after 0.5 s
  nlohmann::json audit = Json(server.Client(kRootToken).Get("/v1/audit?limit=500"));
  ASSERT_TRUE(audit.contains("audit")) << audit.dump();
  for (const nlohmann::json& e : audit["audit"]) {
    EXPECT_NE(e.value("outcome", ""), "unauthenticated") << e.dump();
  }
  EXPECT_TRUE(up());
}

TEST_F(KubeAgentIdentity, TheControllerMayPointItsOwnServiceAndNothingElse) {
  auto can = [this](const std::string& what) {
    std::string out;
    kube_.Kubectl("auth can-i " + what + " -n gantry-system --as=system:serviceaccount:gantry-system:gantry-controller",
                  &out);
    return out.rfind("yes", 0) == 0;
  };
  EXPECT_TRUE(can("update endpoints/gantry"));
  EXPECT_TRUE(can("patch endpoints/gantry"));
  for (const char* refused :
       {"update endpoints/other", "patch endpoints/kubernetes", "create endpoints", "delete endpoints/gantry",
        "patch pods", "update pods", "create pods", "update services", "patch endpointslices.discovery.k8s.io"}) {
    EXPECT_FALSE(can(refused)) << refused;
  }
  // And for real, with the controller's token: another Service's Endpoints stay as they are.
  ASSERT_EQ(kube_
                .Api("POST", "/api/v1/namespaces/gantry-system/endpoints",
                     {{"metadata", {{"name", "other"}}}, {"subsets", nlohmann::json::array()}})
                .first,
            201);
  std::string token = kube_.TokenFor("gantry-system", "gantry-controller", "https://kubernetes.default.svc");
  httplib::Client c(kube_.url());
  c.set_ca_cert_path(kube_.ca().c_str());
  c.enable_server_certificate_verification(true);
  c.set_bearer_token_auth(token);
  auto moved = c.Patch("/api/v1/namespaces/gantry-system/endpoints/other",
                       R"({"subsets": [{"addresses": [{"ip": "10.9.9.9"}], "ports": [{"port": 80}]}]})",
                       "application/merge-patch+json");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->status, 403) << moved->body;
  auto own = c.Patch("/api/v1/namespaces/gantry-system/endpoints/gantry",
                     R"({"subsets": [{"addresses": [{"ip": "10.9.9.9"}], "ports": [{"name": "http", "port": 8080}]}]})",
                     "application/merge-patch+json");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
}

}  // namespace
}  // namespace gantry::testing
