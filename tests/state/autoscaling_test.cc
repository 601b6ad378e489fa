// The controller's autoscaling bookkeeping without processes: requests in flight are not
// asked twice, failures back off and show in the reason, garbage output is refused, nodes
// that never register are given up and given back, and demand that comes and goes does
// not make the hooks flap.
#include "state/autoscaling.h"

#include <gtest/gtest.h>

#include "core/gpu_catalog.h"
#include "core/job.h"

namespace gantry {
namespace {

AutoscalerConfig Config(const GpuCatalog& catalog) {
  auto c = ParseAutoscalerYaml(
      "autoscaler: {scale_up_after: 30s, scale_down_after: 10m, register_timeout: 5m, hook_timeout: 1m}\n"
      "pools:\n"
      "  - {name: a100, gpu_type: A100-80GB, gpus_per_node: 8, max_nodes: 4,\n"
      "     scale_up_command: up, scale_down_command: down}\n",
      catalog);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

JobSpec Job(const std::string& id, int gpus) {
  JobSpec s;
  s.id = id;
  s.request.gpus = gpus;
  return s;
}

CommandResult Exit(int code, std::string out = "", std::string err = "") {
  CommandResult r;
  r.exit_code = code;
  r.out = std::move(out);
  r.err_tail = std::move(err);
  return r;
}

TEST(ParseNodeIds, OneIdPerLineAndAnythingElseIsRefusedNamingTheLine) {
  EXPECT_EQ(*ParseNodeIds("n-1\n\n  n-2  \r\n"), (std::vector<std::string>{"n-1", "n-2"}));
  auto bad = ParseNodeIds("n-1\nCreated instance!!\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "line 2");
  EXPECT_FALSE(ParseNodeIds("\n \n").ok());
  EXPECT_FALSE(ParseNodeIds("$(rm -rf /)").ok());
  EXPECT_FALSE(ParseNodeIds(std::string(200, 'a')).ok());
}

TEST(Autoscaling, ARequestInFlightIsNotAskedTwiceAndAFailureBacksOffAndShowsInTheReason) {
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  Autoscaling a(Config(catalog), catalog);
  JobSpec job = Job("7", 16);  // two 8-GPU nodes
  std::vector<ScalingDemand> demand = {{&job, 0, kNever, false}};
  TimeMs now = 60 * kSecondMs;
  Autoscaling::Decision d = a.Run({}, demand, now);
  ASSERT_EQ(d.hooks.size(), 1u);
  EXPECT_EQ(d.hooks[0].args, (std::vector<std::string>{"a100", "2"}));
  EXPECT_TRUE(a.Run({}, demand, now + kSecondMs).hooks.empty()) << "the call is still running";
  EXPECT_EQ(a.WaitReason("7", now + 5 * kSecondMs), "waiting for a node from pool a100 (requested 5 s ago)");

  Autoscaling::Outcome out = a.Finished(d.hooks[0], Exit(1, "", "quota exceeded\n"), now + 6 * kSecondMs);
  EXPECT_EQ(out.audit_outcome, "failed");
  EXPECT_NE(a.WaitReason("7", now + 7 * kSecondMs).find("scale_up failed: exit code 1: quota exceeded"),
            std::string::npos)
      << a.WaitReason("7", now + 7 * kSecondMs);
  // Back-off: 30 s after the first failure, then 60 s after the second.
  EXPECT_TRUE(a.Run({}, demand, now + 20 * kSecondMs).hooks.empty());
  d = a.Run({}, demand, now + 37 * kSecondMs);
  ASSERT_EQ(d.hooks.size(), 1u);
  a.Finished(d.hooks[0], Exit(0, "Created!\n"), now + 38 * kSecondMs);  // garbage is a failure too
  EXPECT_NE(a.WaitReason("7", now + 40 * kSecondMs).find("not a node id"), std::string::npos);
  EXPECT_TRUE(a.Run({}, demand, now + 90 * kSecondMs).hooks.empty());
  d = a.Run({}, demand, now + 99 * kSecondMs);
  ASSERT_EQ(d.hooks.size(), 1u);
  out = a.Finished(d.hooks[0], Exit(0, "a100-0\na100-1\n"), now + 100 * kSecondMs);
  EXPECT_EQ(out.requested, (std::vector<std::string>{"a100-0", "a100-1"}));
  EXPECT_EQ(a.WaitReason("7", now + 101 * kSecondMs), "waiting for a node from pool a100 (requested 1 s ago)");
  EXPECT_EQ(a.PoolOf("a100-1", {}), 0);
}

TEST(Autoscaling, ANodeThatNeverRegistersIsGivenUpAndGivenBack) {
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  Autoscaling a(Config(catalog), catalog);
  JobSpec job = Job("1", 8);
  Autoscaling::Decision d = a.Run({}, {{&job, 0, kNever, false}}, kMinuteMs);
  a.Finished(d.hooks.at(0), Exit(0, "ghost-1\n"), kMinuteMs + kSecondMs);
  // Five minutes later it has not registered: given up, and the scale-down hook is asked
  // to make sure it is gone (the job asks for a node again in the same round).
  d = a.Run({}, {}, 7 * kMinuteMs);
  ASSERT_EQ(d.hooks.size(), 1u);
  EXPECT_EQ(d.hooks[0].kind, HookCall::Kind::kScaleDown);
  EXPECT_EQ(d.hooks[0].args, (std::vector<std::string>{"a100", "ghost-1"}));
  EXPECT_EQ(a.PoolOf("ghost-1", {}), -1) << "no longer awaited: its pool token cannot register it";
}

// A restarted controller (or a new leader) reads the requests back from the store's meta:
// the awaited ids stay the pool's, and a scale-up that was running lets its nodes
// register for register_timeout.
TEST(Autoscaling, RequestsSurviveARestart) {
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  Autoscaling a(Config(catalog), catalog);
  EXPECT_FALSE(a.Changed()) << "nothing asked for yet";
  JobSpec job = Job("1", 16);
  Autoscaling::Decision d = a.Run({}, {{&job, 0, kNever, false}}, kMinuteMs);
  EXPECT_TRUE(a.Changed()) << "a scale-up started";
  nlohmann::json running = a.Requests();
  a.Finished(d.hooks.at(0), Exit(0, "a100-0\na100-1\n"), kMinuteMs + kSecondMs);
  EXPECT_TRUE(a.Changed());
  EXPECT_FALSE(a.Changed());

  Autoscaling b(Config(catalog), catalog);
  b.Restore(a.Requests(), 2 * kMinuteMs);
  EXPECT_EQ(b.PoolOf("a100-1", {}), 0);
  EXPECT_FALSE(b.Changed()) << "what was read back is saved already";
  EXPECT_TRUE(b.Run({}, {{&job, 0, kNever, false}}, 2 * kMinuteMs).hooks.empty()) << "not asked for again";

  Autoscaling c(Config(catalog), catalog);
  c.Restore(running, 2 * kMinuteMs);
  EXPECT_TRUE(c.ScalingUp("a100", 3 * kMinuteMs)) << "its nodes may still register";
  EXPECT_FALSE(c.ScalingUp("a100", 8 * kMinuteMs)) << "not after register_timeout";
}

// Demand that comes and goes every 4 minutes for two hours, with nodes that register a
// minute after they are asked for: one scale-up, and no scale-down until the demand stops
// for good (scale_down_after is 10 minutes).
TEST(Autoscaling, DemandThatComesAndGoesDoesNotMakeTheHooksFlap) {
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  Autoscaling a(Config(catalog), catalog);
  JobSpec job = Job("1", 8);
  int ups = 0, downs = 0;
  std::vector<PoolNode> nodes;
  TimeMs registers_at = kNever;
  for (TimeMs t = 0; t <= 3 * kHourMs; t += 15 * kSecondMs) {
    bool busy = t < 2 * kHourMs && (t / (4 * kMinuteMs)) % 2 == 0;
    if (registers_at != kNever && t >= registers_at) {
      Node n;
      n.id = "a100-0";
      a.Adopt(0, n);
      nodes = {{"a100-0", 0, true, !busy}};
      registers_at = kNever;
    }
    if (!nodes.empty()) nodes[0].idle = !busy;
    std::vector<ScalingDemand> demand;
    if (busy && nodes.empty()) demand.push_back({&job, t - kMinuteMs, kNever, false});
    Autoscaling::Decision d = a.Run(nodes, demand, t);
    for (const HookCall& call : d.hooks) {
      if (call.kind == HookCall::Kind::kScaleUp) {
        ++ups;
        a.Finished(call, Exit(0, "a100-0\n"), t);
        registers_at = t + kMinuteMs;
      } else {
        ++downs;
        a.Finished(call, Exit(0), t);
        nodes.clear();
      }
    }
  }
  EXPECT_EQ(ups, 1);
  EXPECT_EQ(downs, 1);
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

// A pool without hooks (its nodes come by hand) is never called, and the reason says so.
TEST(Autoscaling, APoolWithoutHooksIsNeverCalledAndTheReasonSaysSo) {
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  auto config = ParseAutoscalerYaml("pools:\n  - {name: t4, gpu_type: T4, gpus_per_node: 4, max_nodes: 2}\n", catalog);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  Autoscaling a(*config, catalog);
  JobSpec job = Job("3", 1);
  EXPECT_TRUE(a.Run({}, {{&job, 0, kNever, false}}, kHourMs).hooks.empty());
  EXPECT_EQ(a.WaitReason("3", kHourMs), "waiting for a node from pool t4 (the pool has no hooks: nodes come by hand)");
}

}  // namespace
}  // namespace gantry
