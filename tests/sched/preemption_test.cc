// Preemption: who may evict whom (priority, reclaim), the protections, victim choice by
// fewest victims across nodes and least lost work, gangs evicted whole, the grace period and the nominated preemptor.
#include <gtest/gtest.h>

#include "core/quota_config.h"
#include "sched/apply_plan.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

SchedulerConfig Preempting() {
  SchedulerConfig c = MechanismConfig();
  c.preemption_enabled = true;
  return c;
}

RunningJob RunningAt(JobSpec spec, int node, std::vector<int> gpus, TimeMs start, TimeMs checkpoint = -1) {
  RunningJob r = Running(std::move(spec), node, std::move(gpus), start);
  r.last_checkpoint_ms = checkpoint;
  return r;
}

std::vector<std::string> Victims(const Plan& plan) {
  std::vector<std::string> ids;
  for (const Preemption& p : plan.preemptions) ids.push_back(p.job_id);
  return ids;
}

// One 8-GPU node, full of medium work started an hour ago; now is 1h.
Snapshot FullNode(std::vector<RunningJob> running) {
  Snapshot snap;
  snap.now_ms = kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  snap.running = std::move(running);
  return snap;
}

TEST(Preemption, HigherClassEvictsWithAGracePeriod) {
  Snapshot snap = FullNode({RunningAt(MakeJob("m").Gpus(8), 0, {0, 1, 2, 3, 4, 5, 6, 7}, 0)});
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(8), kHourMs)};
  Plan plan = Schedule(snap, Preempting());
  ASSERT_EQ(Victims(plan), std::vector<std::string>{"m"});
  EXPECT_EQ(plan.preemptions[0].reason, "priority");
  EXPECT_EQ(plan.preemptions[0].for_job, "urgent");
  EXPECT_EQ(plan.preemptions[0].stop_at_ms, kHourMs + 120 * kSecondMs);  // default grace 120 s
  const WaitingJob* w = FindWaiting(plan, "urgent");
  EXPECT_EQ(w->code, WaitCode::kPreempting);
  EXPECT_EQ(w->estimated_start_ms, kHourMs + 120 * kSecondMs);
  // The same class, or a class that never preempts, waits instead.
  snap.pending = {Pending(MakeJob("peer").Gpus(8), kHourMs)};
  EXPECT_TRUE(Schedule(snap, Preempting()).preemptions.empty());
  snap.running[0] = RunningAt(MakeJob("m").Class("low").Gpus(8), 0, {0, 1, 2, 3, 4, 5, 6, 7}, 0);
  snap.pending = {Pending(MakeJob("polite").Class("low").Gpus(8), kHourMs)};
  EXPECT_TRUE(Schedule(snap, Preempting()).preemptions.empty());
}

// Across nodes the fewest victims go first, then the least lost work: node "a" frees 4
// GPUs by evicting one job (40 min since its checkpoint: 160 GPU-minutes), node "b" by
// evicting four 1-GPU jobs (10 min each: 40 GPU-minutes). Before, the four went: each
// eviction is a job someone waits for again, and Philly on 512 GPUs evicted 7% fewer
// jobs with this order, at a lower mean JCT.
TEST(Preemption, TheNodeWithTheFewestVictimsGoesFirst) {
  Snapshot snap;
  snap.now_ms = kHourMs;
  snap.nodes = {MakeNode("a", "A100-80GB", 4), MakeNode("b", "A100-80GB", 4)};
  snap.running = {RunningAt(MakeJob("big").Gpus(4), 0, {0, 1, 2, 3}, 0, 20 * kMinuteMs)};
  for (int g = 0; g < 4; ++g) {
    snap.running.push_back(RunningAt(MakeJob("small-" + std::to_string(g)).Gpus(1), 1, {g}, 0, 50 * kMinuteMs));
  }
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(4), kHourMs)};
  Plan plan = Schedule(snap, Preempting());
  EXPECT_EQ(Victims(plan), std::vector<std::string>{"big"});
}

TEST(Preemption, ProtectionsAreHonoured) {
  JobSpec critical = MakeJob("crit").Class("critical").Gpus(2);
  JobSpec pinned = MakeJob("pinned").Gpus(2);
  pinned.preemptible = false;
  RunningJob young = RunningAt(MakeJob("young").Gpus(2), 0, {4, 5}, kHourMs - 5 * kMinuteMs);  // < 10 min
  RunningJob tired = RunningAt(MakeJob("tired").Gpus(2), 0, {6, 7}, 0);
  tired.evictions = 3;  // the maximum
  Snapshot snap = FullNode({RunningAt(critical, 0, {0, 1}, 0), RunningAt(pinned, 0, {2, 3}, 0), young, tired});
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(2), kHourMs)};
  Plan plan = Schedule(snap, Preempting());
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(FindWaiting(plan, "urgent")->code, WaitCode::kNoCapacity);
}

TEST(Preemption, WorkedExampleFewestLostGpuSeconds) {
  // A: 4 GPUs, checkpointed 20 min ago (80 GPU-min to lose); B: 2 GPUs, 5 min (10);
  // C: 2 GPUs, 50 min (100). A 4-GPU job evicts A alone: 80 GPU-min = 4800 GPU-s.
  const TimeMs now = kHourMs;
  Snapshot snap = FullNode({RunningAt(MakeJob("A").Gpus(4), 0, {0, 1, 2, 3}, 0, now - 20 * kMinuteMs),
                            RunningAt(MakeJob("B").Gpus(2), 0, {4, 5}, 0, now - 5 * kMinuteMs),
                            RunningAt(MakeJob("C").Gpus(2), 0, {6, 7}, 0, now - 50 * kMinuteMs)});
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(4), now)};
  Plan plan = Schedule(snap, Preempting());
  EXPECT_EQ(Victims(plan), std::vector<std::string>{"A"});
  EXPECT_NE(plan.reason(*FindWaiting(plan, "urgent")).find("(4800 GPU-seconds of work lost)"), std::string::npos)
      << plan.reason(*FindWaiting(plan, "urgent"));
  // Two GPUs: B is cheapest (10 GPU-min), and one victim is enough.
  snap.pending = {Pending(MakeJob("small").Class("high").Gpus(2), now)};
  EXPECT_EQ(Victims(Schedule(snap, Preempting())), std::vector<std::string>{"B"});
}

TEST(Preemption, AGangIsEvictedWhole) {
  // A 2-node gang (4 GPUs on each) and a 4-GPU job on node b; a high 8-GPU job needs a
  // whole node. Freeing node a takes the gang, which then leaves node b half free too.
  Snapshot snap;
  snap.now_ms = kHourMs;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  RunningJob gang = RunningAt(MakeJob("gang").Gpus(8).Nodes(2), 0, {0, 1, 2, 3}, 0, kHourMs - kMinuteMs);
  gang.placement.nodes.push_back({.node = 1, .gpus = {{.gpu = 0}, {.gpu = 1}, {.gpu = 2}, {.gpu = 3}}});
  snap.running = {gang, RunningAt(MakeJob("solo").Gpus(4), 0, {4, 5, 6, 7}, 0, kHourMs - kMinuteMs),
                  RunningAt(MakeJob("other").Gpus(4), 1, {4, 5, 6, 7}, 0, kHourMs - 50 * kMinuteMs)};
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(8), kHourMs)};
  Plan plan = Schedule(snap, Preempting());
  // Node a: gang (8 GPUs x 1 min) + solo (4 x 1 min) = 12 GPU-min; node b: gang + other
  // (4 x 50 min) = 208. Node a wins; the gang appears once.
  EXPECT_EQ(Victims(plan), (std::vector<std::string>{"gang", "solo"}));
}

TEST(Preemption, ReclaimTakesBackBorrowedGpusAfterTheWait) {
  auto quotas =
      QuotaConfig::FromYaml("teams: {owner: {guaranteed: {any: 4}}, borrower: {guaranteed: {any: 2}}}", Catalog());
  ASSERT_TRUE(quotas.ok());
  // borrower holds 8 (6 above its guarantee); owner holds none and waits with a 4-GPU job.
  Snapshot snap;
  snap.now_ms = kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  for (int g = 0; g < 8; ++g) {
    snap.running.push_back(RunningAt(MakeJob("b" + std::to_string(g)).Team("borrower").User("u" + std::to_string(g)), 0,
                                     {g}, 0, kHourMs - (g + 1) * kMinuteMs));
  }
  snap.pending = {Pending(MakeJob("mine").Team("owner").Gpus(4), 0)};
  SchedulerConfig config = Preempting();
  config.reclaim_victims_per_gpu = 1;  // four 1-GPU victims for 4 GPUs (the limit has a test of its own)
  // Below its guarantee for 20 min: not yet (reclaim_after is 30 min).
  snap.below_guarantee_since = {{"owner", kHourMs - 20 * kMinuteMs}};
  EXPECT_TRUE(Schedule(snap, config, &*quotas).preemptions.empty());
  // For 30 min: it reclaims 4 GPUs, the jobs with the least work since their checkpoint.
  snap.below_guarantee_since = {{"owner", kHourMs - 30 * kMinuteMs}};
  Plan plan = Schedule(snap, config, &*quotas);
  EXPECT_EQ(Victims(plan), (std::vector<std::string>{"b0", "b1", "b2", "b3"}));
  EXPECT_EQ(plan.preemptions[0].reason, "reclaim");
  // Never below the borrower's own guarantee. Now borrower holds 3 (1 above its 2) and a
  // third team the other 5, within its own guarantee: 1 GPU can be reclaimed, 2 cannot.
  auto three = QuotaConfig::FromYaml(
      "teams: {owner: {guaranteed: {any: 4}}, borrower: {guaranteed: {any: 2}}, third: {guaranteed: {any: 5}}}",
      Catalog());
  snap.running.resize(3);
  snap.running.push_back(RunningAt(MakeJob("t").Team("third").User("t").Gpus(5), 0, {3, 4, 5, 6, 7}, 0));
  snap.pending = {Pending(MakeJob("two").Team("owner").Gpus(2), 0)};
  EXPECT_TRUE(Schedule(snap, config, &*three).preemptions.empty());
  snap.pending = {Pending(MakeJob("one").Team("owner").Gpus(1), 0)};
  EXPECT_EQ(Victims(Schedule(snap, config, &*three)), std::vector<std::string>{"b0"});
}

TEST(Preemption, AReclaimBreaksUpAtMostOneJobPerTwoGpusItFrees) {
  auto quotas =
      QuotaConfig::FromYaml("teams: {owner: {guaranteed: {any: 8}}, borrower: {guaranteed: {any: 1}}}", Catalog());
  ASSERT_TRUE(quotas.ok());
  // Two 8-GPU nodes. borrower holds eight 1-GPU jobs on node 0, and on node 1 one 4-GPU
  // job and four 1-GPU jobs: all of it above its guarantee of 1. owner, below its
  // guarantee for an hour, waits with a 4-GPU job.
  Snapshot snap;
  snap.now_ms = 2 * kHourMs;
  snap.nodes = {MakeNode("n0", "A100-80GB", 8), MakeNode("n1", "A100-80GB", 8)};
  for (int g = 0; g < 8; ++g) {
    snap.running.push_back(RunningAt(MakeJob("small" + std::to_string(g)).Team("borrower").User("u"), 0, {g}, kHourMs));
  }
  snap.running.push_back(RunningAt(MakeJob("big").Team("borrower").User("u").Gpus(4), 1, {0, 1, 2, 3}, kHourMs));
  for (int g = 4; g < 8; ++g) {
    snap.running.push_back(RunningAt(MakeJob("side" + std::to_string(g)).Team("borrower").User("u"), 1, {g}, kHourMs));
  }
  snap.pending = {Pending(MakeJob("mine").Team("owner").Gpus(4), 0)};
  snap.below_guarantee_since = {{"owner", kHourMs}};
  SchedulerConfig config = Preempting();
  // The default 0.5 allows 2 victims for 4 GPUs: the 4-GPU job alone goes, not four 1-GPU ones.
  EXPECT_EQ(Victims(Schedule(snap, config, &*quotas)), std::vector<std::string>{"big"});
  // With four 1-GPU jobs in its place, every way to 4 GPUs breaks up four jobs: owner
  // waits, with its reservation, for them to end by themselves.
  snap.running.erase(snap.running.begin() + 8);
  for (int g = 0; g < 4; ++g) {
    snap.running.push_back(RunningAt(MakeJob("part" + std::to_string(g)).Team("borrower").User("u"), 1, {g}, kHourMs));
  }
  Plan plan = Schedule(snap, config, &*quotas);
  EXPECT_TRUE(plan.preemptions.empty());
  ASSERT_NE(FindWaiting(plan, "mine"), nullptr);
  // With the limit off (0), it evicts four.
  config.reclaim_victims_per_gpu = 0;
  EXPECT_EQ(Schedule(snap, config, &*quotas).preemptions.size(), 4u);
  // A 1-GPU job may always evict one.
  config.reclaim_victims_per_gpu = 0.5;
  snap.pending = {Pending(MakeJob("one").Team("owner"), 0)};
  EXPECT_EQ(Schedule(snap, config, &*quotas).preemptions.size(), 1u);
}

TEST(Preemption, JobsEndingWithinTheGracePeriodAreNotEvicted) {
  // m ends in 1 minute, within the 2-minute grace: the high job waits for it instead.
  Snapshot snap =
      FullNode({RunningAt(MakeJob("m").Gpus(8).Estimate(kHourMs + kMinuteMs), 0, {0, 1, 2, 3, 4, 5, 6, 7}, 0)});
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(8), kHourMs)};
  Plan plan = Schedule(snap, Preempting());
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(FindWaiting(plan, "urgent")->estimated_start_ms, kHourMs + kMinuteMs);
}

TEST(Preemption, TheNominatedJobGetsTheFreedGpus) {
  // After its victims stop, the preemptor goes first in its class even if younger.
  Snapshot snap;
  snap.now_ms = 2 * kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  PendingJob nominated = Pending(MakeJob("preemptor").Gpus(8), 2 * kHourMs - kMinuteMs);
  nominated.nominated = true;
  snap.pending = {Pending(MakeJob("older").Gpus(8), 0), nominated};
  Plan plan = Schedule(snap, Preempting());
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "preemptor");
}

TEST(Preemption, VictimsRequeueAtTheirOldPlace) {
  Snapshot snap = FullNode({RunningAt(MakeJob("m").Gpus(8), 0, {0, 1, 2, 3, 4, 5, 6, 7}, 0)});
  snap.running[0].submit_ms = 42;
  snap.pending = {Pending(MakeJob("urgent").Class("high").Gpus(8), kHourMs)};
  ApplyPlan(Schedule(snap, Preempting()), snap);
  EXPECT_EQ(snap.running[0].stop_at_ms, kHourMs + 120 * kSecondMs);
  snap.now_ms += 120 * kSecondMs;
  EXPECT_EQ(RequeueStopped(snap), std::vector<std::string>{"m"});
  ASSERT_EQ(snap.pending.size(), 2u);
  EXPECT_EQ(snap.pending[1].submit_ms, 42);  // keeps its place by submit time
  EXPECT_EQ(snap.pending[1].evictions, 1);
  EXPECT_DOUBLE_EQ(snap.pending[1].attained_gpu_ms, 8.0 * (kHourMs + 120 * kSecondMs));  // 8 GPUs x its run
  EXPECT_TRUE(snap.running.empty());
}

TEST(Preemption, RequeuedFractionKeepsItsShareOfService) {
  // A 0.5 time-slice job stopped after 100 s has had 0.5 x 100 s of GPU service.
  Snapshot snap;
  snap.now_ms = 100 * kSecondMs;
  snap.nodes = {MakeNode("t", "T4", 1)};
  RunningJob half = Running(MakeJob("half").Fraction(0.5), 0, {0}, 0);
  half.placement.nodes[0].gpus[0].milli = 500;
  half.stop_at_ms = snap.now_ms;
  snap.running = {half};
  ASSERT_EQ(RequeueStopped(snap).size(), 1u);
  EXPECT_DOUBLE_EQ(snap.pending[0].attained_gpu_ms, 0.5 * 100 * kSecondMs);
}

}  // namespace
}  // namespace gantry
