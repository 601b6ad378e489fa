// A node pool's agent token (users.yaml: role agent, pool: NAME) registers only the nodes
// its pool's scale-up hook started, and then speaks for those nodes only: never for a fixed
// node, another pool's node, or a new name it makes up; and the nodes it registers are the
// pool's whatever labels they claim.
#include <gtest/gtest.h>

#include <filesystem>

#include "security/security_util.h"
#include "server/elastic_cluster.h"

namespace gantry::testing {
namespace {

nlohmann::json Registration(const std::string& node, nlohmann::json labels = nlohmann::json::object()) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    gpus.push_back({{"index", i},
                    {"uuid", fmt::format("GPU-{}-{}", node, i)},
                    {"name", "NVIDIA A100-SXM4-80GB"},
                    {"memory_total_mib", 81920}});
  }
  return {{"node_id", node}, {"inventory", {{"provider", "test"}, {"gpus", gpus}}}, {"labels", labels}};
}

TEST(PoolTokens, APoolTokenRegistersOnlyTheNodesItsHookStartedAndSpeaksForThoseOnly) {
  ElasticCluster c("pool-tokens", {"spot", "other"});
  // Each hook prints a node id and starts nothing (its arguments go into a comment): the
  // test registers by hand.
  c.WritePools(fmt::format(
      "autoscaler: {{scale_up_after: 1s, register_timeout: 1h}}\npools:\n"
      "  - {{name: spot, gpu_type: A100-80GB, gpus_per_node: 2, capacity: spot, min_nodes: 1, max_nodes: 2,\n"
      "     scale_up_command: 'echo spot-9 #', scale_down_command: 'true'}}\n"
      "  - {{name: other, gpu_type: A100-80GB, gpus_per_node: 2, min_nodes: 1, max_nodes: 1,\n"
      "     scale_up_command: 'echo other-1 #', scale_down_command: 'true'}}\n"));
  c.Start();
  auto as = [&](const std::string& token) { return c.server().Client(token.c_str()); };
  auto spot = as(PoolToken("spot"));
  // Both minima are asked for at start; wait until the hooks have answered.
  auto answered = [&](const std::string& pool) {
    return c.Metric(fmt::format(R"(gantry_pool_nodes_requested{{pool="{}"}})", pool)) == 1 &&
           c.Metric(fmt::format(R"(gantry_pool_hook_running{{pool="{}",hook="scale_up"}})", pool)) == 0;
  };
  ASSERT_TRUE(c.WaitFor([&] { return answered("spot") && answered("other"); }, 10));
  // A fixed node registers with its own token.
  auto own = as(AgentToken("node-a")).Post("/v1/agent/register", Registration("node-a").dump(), "application/json");
  ASSERT_EQ(own->status, 200) << own->body;

  for (const char* node : {"node-a", "other-1", "made-up-7"}) {
    auto r = spot.Post("/v1/agent/register", Registration(node).dump(), "application/json");
    EXPECT_EQ(r->status, 403) << node << ": " << r->body;
  }
  auto report = spot.Post("/v1/agent/report", R"({"node_id": "node-a", "events": []})", "application/json");
  EXPECT_EQ(report->status, 403) << report->body;

  // A restarted server still knows which nodes each pool asked for (the store's meta).
  c.server().Kill(SIGKILL);
  c.Start();
  auto spot_again = as(PoolToken("spot"));
  EXPECT_EQ(spot_again.Post("/v1/agent/register", Registration("made-up-8").dump(), "application/json")->status, 403);
  // Its own pool's node registers, and is the pool's even when it says otherwise.
  auto mine =
      spot_again.Post("/v1/agent/register", Registration("spot-9", {{"pool", "other"}}).dump(), "application/json");
  ASSERT_EQ(mine->status, 200) << mine->body;
  nlohmann::json nodes = Json(c.Root().Get("/v1/nodes"));
  std::string pool_label;
  for (const auto& n : nodes["nodes"]) {
    if (n["id"] == "spot-9") pool_label = n["labels"].value("pool", "");
  }
  EXPECT_EQ(pool_label, "spot");
  // It speaks for spot-9 now, and still for nothing else.
  EXPECT_EQ(spot_again.Post("/v1/agent/report", R"({"node_id": "spot-9", "events": []})", "application/json")->status,
            200);
  EXPECT_EQ(spot_again.Post("/v1/agent/report", R"({"node_id": "other-1", "events": []})", "application/json")->status,
            403);
  // The other pool's token cannot take spot-9.
  auto other = as(PoolToken("other"));
  EXPECT_EQ(other.Post("/v1/agent/register", Registration("spot-9").dump(), "application/json")->status, 403);
  EXPECT_EQ(other.Post("/v1/agent/register", Registration("other-1").dump(), "application/json")->status, 200);
  // Every refusal is audited.
  std::string audit = c.Root().Get("/v1/audit?limit=200")->body;
  EXPECT_NE(audit.find("speaks for the nodes of pool spot only"), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
