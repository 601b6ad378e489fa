// GPU indices pinned by a job (single-machine queues' allowed_gpus): the engine places it
// only on those GPUs, whole, shared or waiting for them, reserves them and preempts for
// them; the controller takes indices only on a single-node cluster.
#include <gtest/gtest.h>

#include "sched/apply_plan.h"
#include "sched/engine.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

std::vector<int> GpusOf(const StartDecision& s) {
  std::vector<int> out;
  for (const GpuShare& g : s.placement.nodes.at(0).gpus) out.push_back(g.gpu);
  return out;
}

TEST(PinnedGpus, AJobRunsOnlyOnItsGpus) {
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 4)};
  snap.pending = {Pending(MakeJob("two").Pin({2, 3}).Gpus(2)), Pending(MakeJob("slice").Pin({1}).Fraction(0.5), 1)};
  Plan plan = Schedule(snap);
  ASSERT_NE(FindStart(plan, "two"), nullptr);
  EXPECT_EQ(GpusOf(*FindStart(plan, "two")), (std::vector<int>{2, 3}));
  ASSERT_NE(FindStart(plan, "slice"), nullptr);
  EXPECT_EQ(GpusOf(*FindStart(plan, "slice")), (std::vector<int>{1}));
}

TEST(PinnedGpus, AJobWaitsForItsGpusWhileOthersAreFree) {
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 4)};
  snap.now_ms = kHourMs;
  snap.running = {Running(MakeJob("busy").Limit(2 * kHourMs), 0, {0}, 0)};
  snap.pending = {Pending(MakeJob("pinned").Pin({0}).Estimate(kHourMs)), Pending(MakeJob("any"), 1)};
  Plan plan = Schedule(snap);
  EXPECT_EQ(FindStart(plan, "pinned"), nullptr);
  ASSERT_NE(FindStart(plan, "any"), nullptr);
  EXPECT_NE(GpusOf(*FindStart(plan, "any")), (std::vector<int>{0}));
  const WaitingJob* w = FindWaiting(plan, "pinned");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->estimated_start_ms, 2 * kHourMs);  // when GPU 0 is free, not at once on GPU 1
  EXPECT_NE(plan.reasons[w->reason_id].find("needs its GPUs pinned to GPUs 0"), std::string::npos)
      << plan.reasons[w->reason_id];
}

TEST(PinnedGpus, PreemptionFreesThePinnedGpus) {
  SchedulerConfig config = MechanismConfig();
  config.preemption_enabled = true;
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 2)};
  snap.now_ms = kHourMs;
  snap.running = {Running(MakeJob("low0").Class("low"), 0, {0}, 0), Running(MakeJob("low1").Class("low"), 0, {1}, 0)};
  snap.pending = {Pending(MakeJob("urgent").Class("critical").Pin({1}), kHourMs)};
  Plan plan = Schedule(snap, config);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].job_id, "low1");
}

TEST(PinnedGpus, TheControllerTakesIndicesOnlyOnASingleNode) {
  Harness one;
  one.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer pinned = one.Submit("{gpu_indices: [2], command: 'true'}", kAlice);
  ASSERT_EQ(pinned.status, 201) << pinned.body.dump();
  EXPECT_EQ(pinned.body["placement"][0]["gpus"][0]["index"], 2);
  EXPECT_EQ(one.Submit("{gpu_indices: [4], command: 'true'}", kAlice).body["error"]["field"], "gpu_indices");
  auto too_many = ParseJobSpecText("{gpus: 3, gpu_indices: [0, 1], command: 'true'}");
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().field(), "gpus");
  Harness two;
  two.Attach({MakeNode("n1", "A100-80GB", 4), MakeNode("n2", "A100-80GB", 4)});
  ApiAnswer refused = two.Submit("{gpu_indices: [0], command: 'true'}", kAlice);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["error"]["field"], "gpu_indices");
}

}  // namespace
}  // namespace gantry::testing
