// Agents bound to their node: an agent token speaks for one node only, sessions cannot be
// guessed, a standalone server's own node cannot be taken over, and a node that comes
// back with other GPUs is reconciled instead of crashing the server.
#include <gtest/gtest.h>

#include <filesystem>

#include "security/security_util.h"

namespace gantry::testing {
namespace {

// An inventory of `n` T4s as an agent registers it.
nlohmann::json Registration(const std::string& node, int n) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    gpus.push_back(
        {{"index", i}, {"uuid", fmt::format("GPU-{}-{}", node, i)}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}});
  }
  return {{"node_id", node}, {"inventory", {{"provider", "test"}, {"gpus", gpus}}}};
}

class AgentIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = TempPath("cluster");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir, "");
    server_->Start();
  }
  httplib::Client Agent(const std::string& node) {
    std::string token = AgentToken(node);
    return server_->Client(token.c_str());
  }
  // Registers `node` by hand with `gpus` T4s; returns the session.
  std::string Register(const std::string& node, int gpus) {
    auto r = Agent(node).Post("/v1/agent/register", Registration(node, gpus).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return Json(r).value("session", "");
  }
  int AuditCount(int status, const std::string& user) {
    nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=100"));
    int n = 0;
    for (const auto& e : audit["audit"]) n += e.value("status", 0) == status && e.value("user", "") == user;
    return n;
  }
  std::unique_ptr<ServerProcess> server_;
};

// Before: node-b's agent read node-a's orders (with a user's API key in them) and reported
// node-a's job as succeeded; nothing was audited.
TEST_F(AgentIdentity, AnAgentTokenSpeaksForItsOwnNodeOnly) {
  std::string session = Register("node-a", 2);
  auto alice = server_->Client(kAliceToken);
  auto job = alice.Post("/v1/jobs", R"({"gpus": 2, "command": "train", "env": {"WANDB_API_KEY": "k-123"}})",
                        "application/json");
  std::string id = Json(job)["id"];
  ASSERT_EQ(Json(job)["state"], "running") << job->body;  // on node-a, the only node
  Register("node-b", 2);
  auto intruder = Agent("node-b");
  auto orders = intruder.Get(fmt::format("/v1/agent/orders?node=node-a&session={}&ack=0&wait=0", session));
  ASSERT_TRUE(orders);
  EXPECT_EQ(orders->status, 403);
  EXPECT_EQ(orders->body.find("k-123"), std::string::npos);
  nlohmann::json report = {{"node_id", "node-a"},
                           {"events", {{{"type", "exited"}, {"job_id", id}, {"run", 1}, {"exit_code", 0}}}},
                           {"logs", {{{"job_id", id}, {"stream", "stdout"}, {"offset", 0}, {"data", "aGk="}}}}};
  auto forged = intruder.Post("/v1/agent/report", report.dump(), "application/json");
  EXPECT_EQ(forged->status, 403);
  auto takeover = intruder.Post("/v1/agent/register", Registration("node-a", 2).dump(), "application/json");
  EXPECT_EQ(takeover->status, 403);
  EXPECT_EQ(JobField(alice, id, "state"), "running");
  EXPECT_EQ(AuditCount(403, "agent-node-b"), 3);
  // The rightful agent still gets its orders, the key included.
  auto own = Agent("node-a").Get(fmt::format("/v1/agent/orders?node=node-a&session={}&ack=0&wait=0", session));
  EXPECT_EQ(own->status, 200);
  EXPECT_NE(own->body.find("k-123"), std::string::npos);
  // Users and admins are no agents.
  EXPECT_EQ(server_->Client(kRootToken).Post("/v1/agent/report", report.dump(), "application/json")->status, 403);
}

// Before: sessions counted 1, 2, ...
TEST_F(AgentIdentity, SessionsAreRandomAndBoundToTheirToken) {
  std::string first = Register("node-a", 1);
  std::string second = Register("node-a", 1);
  EXPECT_GE(first.size(), 40u);
  EXPECT_NE(first, second);
  auto a = Agent("node-a");
  EXPECT_EQ(a.Get("/v1/agent/orders?node=node-a&session=1&ack=0&wait=0")->status, 409);
  EXPECT_EQ(a.Get("/v1/agent/orders?node=node-a&session=" + first + "&ack=0&wait=0")->status, 409);
  EXPECT_EQ(a.Get("/v1/agent/orders?node=node-a&session=" + second + "&ack=0&wait=0")->status, 200);
}

// Before: a node re-registering with fewer GPUs while a job used the missing one made
// every job call answer 500 (std::bad_alloc), and the server later crashed.
TEST_F(AgentIdentity, ANodeBackWithFewerGpusRequeuesTheJobsOnTheMissingOnes) {
  Register("node-a", 4);
  auto alice = server_->Client(kAliceToken);
  std::string big = Json(alice.Post("/v1/jobs", R"({"gpus": 4, "command": "train"})", "application/json"))["id"];
  ASSERT_EQ(JobField(alice, big, "state"), "running");
  Register("node-a", 2);
  EXPECT_EQ(WaitUntil([&] { return JobField(alice, big, "state"); }, "pending"), "pending");
  auto list = alice.Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
  nlohmann::json events = Json(alice.Get("/v1/jobs/" + big + "/events"));
  EXPECT_NE(events.dump().find("the node re-registered with other GPUs"), std::string::npos) << events.dump();
  EXPECT_EQ(alice.Delete("/v1/jobs/" + big)->status, 200);
  // A job that fits the node as it is now runs there.
  std::string small = Json(alice.Post("/v1/jobs", R"({"gpus": 2, "command": "x"})", "application/json"))["id"];
  EXPECT_EQ(JobField(alice, small, "state"), "running");
  EXPECT_EQ(server_->Client(nullptr).Get("/healthz")->status, 200);
  // Readings and health for GPU indexes the node does not have are dropped, not indexed.
  nlohmann::json stray = {
      {"node_id", "node-a"},
      {"telemetry", {{{"gpu", 3}, {"sample", {{"util", 50}}}}, {{"gpu", -7}, {"sample", {{"util", 5}}}}}},
      {"health", {{{"gpu", 99}, {"healthy", false}, {"reason", "xid 79"}}}}};
  EXPECT_EQ(Agent("node-a").Post("/v1/agent/report", stray.dump(), "application/json")->status, 200);
  auto metrics = server_->Client(nullptr).Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
}

// Before: an agent token registered over a standalone server's own node.
TEST(StandaloneNode, CannotBeTakenOverByAnAgent) {
  std::string dir = TempPath("standalone");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "1x2xT4");
  // An agent token bound to the standalone node's own id.
  server.WriteUsers(std::string(kTestTeams));
  {
    std::ofstream users(dir + "/config/users.yaml", std::ios::app);
    users << "  - {name: agent-local, team: ops, role: agent, node: t4-0, token_sha256: "
          << Sha256Hex(AgentToken("t4-0")) << "}\n";
  }
  server.Start();
  auto nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
  ASSERT_EQ(nodes["nodes"][0]["id"], "t4-0") << nodes.dump();
  std::string token = AgentToken("t4-0");
  auto r = server.Client(token.c_str()).Post("/v1/agent/register", Registration("t4-0", 8).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
  EXPECT_EQ(nodes["nodes"][0]["gpus"].size(), 2u);
}

}  // namespace
}  // namespace gantry::testing
