// Pool hooks that hang, fail, print garbage or answer "no capacity", and requested nodes
// that never register: scheduling goes on, each failure shows in the queue's reason, the
// metrics, the audit log and the server's log, retries back off, a spot pool without
// capacity hands its jobs to on-demand, and a node that never registers is given up and
// given back. The real server and a real agent for the fixed node.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/read_file.h"
#include "elastic_cluster.h"

namespace gantry::testing {
namespace {

std::string RunCli(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

int Lines(const std::string& path) {
  std::string text = ReadFileNoThrow(path).value_or("");
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(PoolHooks, HooksThatHangFailOrPrintGarbageNeverStallSchedulingAndEachFailureShows) {
  ElasticCluster c("pool-hooks", {});
  const std::string d = c.dir();
  // Each pool's hooks are scripts that log their calls to DIR/POOL.calls.
  auto pool = [&](const std::string& name, const char* capacity, const std::string& up, const char* labels = "{}") {
    std::ofstream(d + "/" + name + "-up.sh") << "echo up \"$@\" >> " << d << "/" << name << ".calls\n" << up << "\n";
    std::ofstream(d + "/" + name + "-down.sh") << "echo down \"$@\" >> " << d << "/" << name << ".calls\n";
    return fmt::format(
        "  - {{name: {0}, gpu_type: A100-80GB, gpus_per_node: 2, capacity: {1}, max_nodes: 2, labels: {2},\n"
        "     scale_up_command: 'sh {3}/{0}-up.sh', scale_down_command: 'sh {3}/{0}-down.sh'}}\n",
        name, capacity, labels, d);
  };
  c.WritePools(
      "autoscaler: {scale_up_after: 1s, scale_down_after: 1m, register_timeout: 3s, "
      "spot_fallback_after: 2s, hook_timeout: 2s}\npools:\n" +
      pool("hang", "on_demand", "sleep 30") +
      pool("fail", "on_demand", "echo quota exceeded for a2-highgpu-2g >&2; exit 1") +
      pool("garbage", "on_demand", "echo Created instance!! id=abc") +
      pool("nocap", "spot", "echo no spot left >&2; exit 3", "{tier: cheap}") +
      pool("fallback", "on_demand", "echo fallback-7", "{tier: cheap}"));
  c.Start();
  AgentProcess agent(d, "node-a", "4xT4");
  agent.Start(c.server().address());
  ASSERT_TRUE(c.WaitFor([&] { return c.LiveNodes().count("node-a"); }, 15));

  auto submit_to = [&](const std::string& selector) {
    return c.Submit(
        fmt::format(R"({{"gpus": 2, "gpu_types": ["A100-80GB"], "node_selector": {}, "command": "true"}})", selector));
  };
  std::string hang = submit_to(R"({"pool": "hang"})");
  std::string fail = submit_to(R"({"pool": "fail"})");
  std::string garbage = submit_to(R"({"pool": "garbage"})");
  std::string cheap = submit_to(R"({"tier": "cheap"})");
  ASSERT_TRUE(c.WaitFor([&] { return c.Metric(R"(gantry_pool_hook_running{pool="hang",hook="scale_up"})") == 1; }, 10));

  // The hang hook runs; a job for the fixed node starts at once all the same.
  auto started = std::chrono::steady_clock::now();
  std::string t4 = c.Submit(R"({"gpus": 1, "gpu_types": ["T4"], "command": "true"})");
  ASSERT_TRUE(c.WaitFor([&] { return c.JobState(t4) == "succeeded"; }, 10));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("a T4 job ran to the end in %.2f s while the hang pool's hook hung\n", took);
  EXPECT_EQ(c.Metric(R"(gantry_pool_hook_running{pool="hang",hook="scale_up"})"), 1) << "still hanging meanwhile";

  // Each failure is in the waiting job's reason.
  std::string reason;
  EXPECT_TRUE(
      c.WaitFor([&] { return (reason = c.QueueReason(hang)).find("killed after 2 s") != std::string::npos; }, 10))
      << reason;
  EXPECT_TRUE(c.WaitFor(
      [&] {
        return (reason = c.QueueReason(fail)).find("exit code 1: quota exceeded for a2-highgpu-2g") !=
               std::string::npos;
      },
      10))
      << reason;
  EXPECT_NE(reason.find("waiting for a node from pool fail"), std::string::npos) << reason;
  EXPECT_TRUE(
      c.WaitFor([&] { return (reason = c.QueueReason(garbage)).find("is not a node id") != std::string::npos; }, 10))
      << reason;
  std::printf("queue reasons:\n  %s\n  %s\n  %s\n", c.QueueReason(hang).c_str(), c.QueueReason(fail).c_str(),
              reason.c_str());

  // No spot capacity: the spot pool keeps the job for spot_fallback_after, then on-demand
  // takes it; that node never registers, so it is given up and given back.
  EXPECT_TRUE(c.WaitFor([&] { return Lines(d + "/fallback.calls") >= 2; }, 20))
      << ReadFileNoThrow(d + "/fallback.calls").value_or("(no calls)");
  std::string fallback = ReadFileNoThrow(d + "/fallback.calls").value_or("");
  EXPECT_NE(fallback.find("up fallback 1\n"), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("down fallback fallback-7\n"), std::string::npos) << fallback;
  EXPECT_GE(Lines(d + "/nocap.calls"), 1);
  EXPECT_GE(c.Metric(R"(gantry_pool_no_capacity_total{pool="nocap"})"), 1);
  EXPECT_GE(c.Metric(R"(gantry_pool_nodes_given_up_total{pool="fallback"})"), 1);
  EXPECT_EQ(c.JobState(cheap), "pending");

  // Failures back off (1, 2, 4, 8, 16 s...): a handful of calls, not one a second.
  int fail_calls = Lines(d + "/fail.calls");
  EXPECT_GE(fail_calls, 2);
  EXPECT_LE(fail_calls, 6);
  EXPECT_GE(c.Metric(R"(gantry_pool_scale_up_failures_total{pool="fail"})"), 2);
  EXPECT_GE(c.Metric(R"(gantry_pool_scale_up_failures_total{pool="hang"})"), 1);
  EXPECT_GE(c.Metric(R"(gantry_pool_scale_up_failures_total{pool="garbage"})"), 1);

  // GET /v1/pools and `gantry pools` show each pool's last failure.
  nlohmann::json pools = Json(c.Root().Get("/v1/pools"));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& p : pools["pools"]) by_name[p["name"]] = p;
  ASSERT_EQ(by_name.size(), 5u) << pools.dump();
  EXPECT_NE(by_name["fail"].value("last_error", "").find("quota exceeded"), std::string::npos) << pools.dump();
  EXPECT_EQ(by_name["nocap"]["capacity"], "spot");
  std::string cli = RunCli(
      fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} pools", c.server().address(), kAliceToken, GANTRY_BINARY));
  std::printf("gantry pools:\n%s", cli.c_str());
  EXPECT_NE(cli.find("last failures:"), std::string::npos) << cli;
  EXPECT_NE(cli.find("fail: scale_up failed: exit code 1: quota exceeded"), std::string::npos) << cli;

  // Audited, and in the server's log.
  std::string audit = c.Root().Get("/v1/audit?limit=500")->body;
  EXPECT_NE(audit.find("gantry-autoscaler"), std::string::npos);
  EXPECT_NE(audit.find("quota exceeded"), std::string::npos);
  EXPECT_NE(audit.find("no_capacity"), std::string::npos);
  std::string log = ReadFileNoThrow(d + "/server.log").value_or("");
  EXPECT_NE(log.find("autoscaler: pool fail: scale_up failed: exit code 1"), std::string::npos);
  EXPECT_NE(log.find("node fallback-7 of pool fallback never registered"), std::string::npos);
  EXPECT_NE(log.find("pool nocap has no spot capacity"), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing

namespace gantry::testing {
namespace {

// Jobs held back by their team's quota, or held, never make a pool grow; released, they do.
TEST(PoolHooks, JobsHeldBackByQuotaOrAHoldAskForNoNodes) {
  ElasticCluster c("pool-quota", {});
  const std::string d = c.dir();
  std::ofstream(d + "/up.sh") << "echo up \"$@\" >> " << d << "/calls\n";
  c.WritePools(
      fmt::format("autoscaler: {{scale_up_after: 2s, hook_timeout: 5s}}\npools:\n"
                  "  - {{name: a100, gpu_type: A100-80GB, gpus_per_node: 2, max_nodes: 2,\n"
                  "     scale_up_command: 'sh {0}/up.sh', scale_down_command: 'true'}}\n",
                  d));
  std::ofstream(d + "/config/team_quotas.yaml") << "teams:\n  nlp: {max_gpus: 2}\n";
  c.Start();
  // nlp holds its 2 GPUs on the fixed node: its next job waits for quota, not for room.
  AgentProcess agent(d, "node-a", "4xT4");
  agent.Start(c.server().address());
  ASSERT_TRUE(c.WaitFor([&] { return c.LiveNodes().count("node-a"); }, 15));
  auto bob = c.server().Client(kBobToken);
  auto running = bob.Post("/v1/jobs", R"({"gpus": 2, "gpu_types": ["T4"], "command": "sleep 60"})", "application/json");
  ASSERT_EQ(running->status, 201) << running->body;
  ASSERT_TRUE(c.WaitFor([&] { return c.JobState(Json(running)["id"]) == "running"; }, 10));
  auto r = bob.Post("/v1/jobs", R"({"gpus": 2, "gpu_types": ["A100-80GB"], "command": "true"})", "application/json");
  ASSERT_EQ(r->status, 201) << r->body;
  std::string over_quota = Json(r)["id"];
  std::string held = c.Submit(R"({"gpus": 2, "gpu_types": ["A100-80GB"], "command": "true"})");
  ASSERT_EQ(c.Alice().Post("/v1/jobs/" + held + "/hold", "", "application/json")->status, 200);
  std::this_thread::sleep_for(std::chrono::seconds(5));  // two scale_up_after and more
  EXPECT_FALSE(std::filesystem::exists(d + "/calls")) << ReadFileNoThrow(d + "/calls").value_or("");
  std::string reason = c.QueueReason(over_quota);
  EXPECT_EQ(reason.find("waiting for a node"), std::string::npos) << reason;
  EXPECT_NE(reason.find("nlp"), std::string::npos) << "it waits for its team's quota: " << reason;
  EXPECT_EQ(c.Metric(R"(gantry_pool_scale_up_calls_total{pool="a100"})"), 0);

  ASSERT_EQ(c.Alice().Post("/v1/jobs/" + held + "/release", "", "application/json")->status, 200);
  EXPECT_TRUE(c.WaitFor([&] { return std::filesystem::exists(d + "/calls"); }, 10)) << "released, it asks";
  EXPECT_EQ(ReadFileNoThrow(d + "/calls").value_or("").rfind("up a100 1\n", 0), 0u);
}

}  // namespace
}  // namespace gantry::testing
