// A node pool's agent token (users.yaml: role agent, pool: NAME) registers only the nodes
// its pool's scale-up hook started, and then speaks for those nodes only: never for a fixed
// node, another pool's node, or a new name it makes up; and the nodes it registers are the
// pool's whatever labels they claim.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
  // A fixed node registers with its own token; it claims the spot pool, and is not the pool's
  // (the pool's scale-down hook would be given it).
  auto own = as(AgentToken("node-a"))
                 .Post("/v1/agent/register", Registration("node-a", {{"pool", "spot"}}).dump(), "application/json");
  ASSERT_EQ(own->status, 200) << own->body;
  const nlohmann::json fixed_nodes = Json(c.Root().Get("/v1/nodes"));
  bool fixed_seen = false;
  for (const auto& n : fixed_nodes["nodes"]) {
    if (n.value("id", "") != "node-a") continue;
    fixed_seen = true;
    EXPECT_FALSE(n.value("labels", nlohmann::json::object()).contains("pool")) << n.dump();
  }
  EXPECT_TRUE(fixed_seen) << fixed_nodes.dump();

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

// `n` GPUs of model `name` (as NVML names it) on `node`.
nlohmann::json Shaped(const std::string& node, int n, const std::string& name) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    gpus.push_back(
        {{"index", i}, {"uuid", fmt::format("GPU-{}-{}", node, i)}, {"name", name}, {"memory_total_mib", 15360}});
  }
  return {{"node_id", node}, {"inventory", {{"provider", "test"}, {"gpus", gpus}}}};
}

// Before: while a scale-up ran (any user starts one), the pool's token registered evil-0,
// ext-2 and --dry-run (2 x T4) and i-0controller (64 x H100) into a pool of 2 x T4 with
// max_nodes 3; a user's H100 job went to the fake node, and the idle fakes went to the
// scale-down hook, which terminates what it is given.
TEST(PoolTokens, ItRegistersOnlyTheIdsItsHookPrintedInThePoolsShape) {
  ElasticCluster c("pool-shape", {"t4"});
  const std::string down_args = TempPath("pool-shape") + "/scale-down.args";
  const std::string go_on = TempPath("pool-shape") + "/hook.go-on";
  // Asked for 1 node (min_nodes), the hook prints 2 once the test lets it go on (however
  // slow the machine, the registrations below come while it runs): the second goes back.
  c.WritePools(
      fmt::format("autoscaler: {{scale_up_after: 1s, register_timeout: 1h}}\npools:\n"
                  "  - {{name: t4, gpu_type: T4, gpus_per_node: 2, min_nodes: 1, max_nodes: 3,\n"
                  "     scale_up_command: 'while [ ! -e {} ]; do sleep 0.1; done; echo t4-a; echo t4-extra #',\n"
                  "     scale_down_command: 'echo \"$@\" >> {} #'}}\n",
                  go_on, down_args));
  c.Start();
  auto pool = c.server().Client(PoolToken("t4").c_str());
  auto hook_running = [&] { return c.Metric(R"(gantry_pool_hook_running{pool="t4",hook="scale_up"})") == 1; };
  ASSERT_TRUE(c.WaitFor(hook_running, 10));
  auto register_as = [&](const nlohmann::json& body) {
    auto r = pool.Post("/v1/agent/register", body.dump(), "application/json");
    return r ? r->status : -1;
  };
  // While the hook runs, no id is known yet: valid ids are asked to wait, an option-like
  // id is no id at all.
  EXPECT_EQ(register_as(Shaped("evil-0", 2, "Tesla T4")), 503);
  EXPECT_EQ(register_as(Shaped("ext-2", 2, "Tesla T4")), 503);
  EXPECT_EQ(register_as(Shaped("i-0controller", 64, "NVIDIA H100 80GB HBM3")), 503);
  EXPECT_EQ(register_as(Shaped("--dry-run", 2, "Tesla T4")), 400);
  EXPECT_TRUE(hook_running());
  std::ofstream(go_on).put('\n');
  ASSERT_TRUE(c.WaitFor([&] { return !hook_running(); }, 30));
  // Once it printed t4-a: only t4-a, and only as 2 x T4.
  EXPECT_EQ(register_as(Shaped("evil-1", 2, "Tesla T4")), 403);
  EXPECT_EQ(register_as(Shaped("t4-a", 64, "NVIDIA H100 80GB HBM3")), 403);
  EXPECT_EQ(register_as(Shaped("t4-a", 1, "Tesla T4")), 403);
  EXPECT_EQ(register_as(Shaped("t4-extra", 2, "Tesla T4")), 403);  // more than asked for: given back
  EXPECT_EQ(register_as(Shaped("t4-a", 2, "Tesla T4")), 200);
  nlohmann::json nodes = Json(c.Root().Get("/v1/nodes"));
  std::vector<std::string> ids;
  for (const auto& n : nodes["nodes"]) ids.push_back(n["id"]);
  EXPECT_EQ(ids, std::vector<std::string>{"t4-a"}) << nodes.dump();
  // The scale-down hook was given the hook's own extra id, and nothing else.
  ASSERT_TRUE(c.WaitFor([&] { return std::filesystem::exists(down_args); }, 10));
  EXPECT_EQ(ReadFileNoThrow(down_args).value_or(""), "t4 t4-extra\n");
  std::string audit = c.Root().Get("/v1/audit?limit=200")->body;
  EXPECT_NE(audit.find("was not started by pool t4's scale-up hook"), std::string::npos) << audit;
  EXPECT_NE(audit.find("pool t4's nodes have 2 x T4; node t4-a reports 64 x H100-80GB"), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
