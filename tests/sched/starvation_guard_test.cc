// The starvation guard: a team with jobs waiting and no GPU past the bound has its smallest
// waiting job considered first, with a reservation of its own, and that job may evict
// what other teams hold above their guarantees, whatever its size; when nothing borrowed
// frees its shape, work within a guarantee of a team that keeps GPUs of its own.
#include <gtest/gtest.h>

#include "core/quota_config.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

SchedulerConfig Guarded() {
  SchedulerConfig c = MechanismConfig();
  c.preemption_enabled = true;
  c.starvation_bound_ms = 45 * kMinuteMs;
  return c;
}

// One 8-GPU node held by team "big" (no guarantee: all of it borrowed) for the next days;
// team "small" has waited with nothing since `starving_since`. Now is 2 h.
Snapshot Starving(TimeMs starving_since) {
  Snapshot snap;
  snap.now_ms = 2 * kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  for (int k = 0; k < 4; ++k) {
    snap.running.push_back(
        Running(MakeJob("big-" + std::to_string(k)).Team("big").Gpus(2).Estimate(72 * kHourMs).Limit(96 * kHourMs), 0,
                {2 * k, 2 * k + 1}));
  }
  snap.pending = {Pending(MakeJob("old-4").Team("small").Gpus(4), 0),
                  Pending(MakeJob("new-1").Team("small").Gpus(1), kHourMs)};
  snap.starving_since["small"] = starving_since;
  return snap;
}

TEST(StarvationGuard, PastTheBoundTheTeamsSmallestJobEvictsBorrowedWork) {
  Plan plan = Schedule(Starving(0), Guarded());
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].for_job, "new-1");  // the one that ends the starvation soonest
  EXPECT_EQ(plan.preemptions[0].reason, "reclaim");
  ASSERT_FALSE(plan.waiting.empty());
  EXPECT_EQ(plan.waiting[0].job_id, "new-1");  // first in line
  EXPECT_EQ(plan.waiting[0].code, WaitCode::kPreempting);
}

TEST(StarvationGuard, BeforeTheBoundOrWhenOffNothingIsEvicted) {
  EXPECT_TRUE(Schedule(Starving(90 * kMinuteMs), Guarded()).preemptions.empty());  // 30 min
  SchedulerConfig off = Guarded();
  off.starvation_bound_ms = 0;
  EXPECT_TRUE(Schedule(Starving(0), off).preemptions.empty());
}

// Borrowed work goes first: with a guarantee of 6, "big" holds 2 of its 8 GPUs borrowed,
// one 2-GPU job's worth. The rescue evicts under the reclaim rule, not under "starvation",
// which would reach into the guarantee.
TEST(StarvationGuard, BorrowedWorkGoesBeforeWorkWithinAGuarantee) {
  auto quotas = QuotaConfig::FromYaml("teams:\n  big: {guaranteed: {any: 6}}\n", Catalog());
  ASSERT_TRUE(quotas.ok());
  Plan plan = Schedule(Starving(0), Guarded(), &*quotas);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].reason, "reclaim");
}

// Every GPU is within another team's guarantee (the cluster is oversubscribed at its
// guarantees): the bound still holds. The rescue takes one job from a team that keeps
// GPUs of its own, under the rule "starvation".
TEST(StarvationGuard, WhenNothingIsBorrowedItTakesFromATeamThatKeepsGpus) {
  auto quotas = QuotaConfig::FromYaml("teams:\n  big: {guaranteed: {any: 8}}\n", Catalog());
  ASSERT_TRUE(quotas.ok());
  Plan plan = Schedule(Starving(0), Guarded(), &*quotas);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].reason, "starvation");
  EXPECT_EQ(plan.preemptions[0].for_job, "new-1");
}

// ...but never a team's last GPUs: that would only move the starvation to another team.
TEST(StarvationGuard, ItNeverTakesATeamsLastGpus) {
  Snapshot snap = Starving(0);
  snap.running = {Running(MakeJob("all").Team("big").Gpus(8).Estimate(72 * kHourMs).Limit(96 * kHourMs), 0,
                          {0, 1, 2, 3, 4, 5, 6, 7})};
  auto quotas = QuotaConfig::FromYaml("teams:\n  big: {guaranteed: {any: 8}}\n", Catalog());
  ASSERT_TRUE(quotas.ok());
  EXPECT_TRUE(Schedule(snap, Guarded(), &*quotas).preemptions.empty());
}

// The node's only job may not be evicted: the starving team's jobs wait, and the one that
// names a GPU type says that type is scarcer than what running and waiting jobs that can
// use no other type ask of it (8 GPUs; 8 running, 4 waiting); the one that names no type
// says nothing of the kind.
TEST(StarvationGuard, AJobWhoseTypeIsScarcerThanItsDemandSaysSo) {
  Snapshot snap = Starving(0);
  JobSpec all = MakeJob("all").Team("big").Gpus(8).Types({"A100-80GB"}).Estimate(72 * kHourMs).Limit(96 * kHourMs);
  all.preemptible = false;
  snap.running = {Running(all, 0, {0, 1, 2, 3, 4, 5, 6, 7})};
  snap.pending = {Pending(MakeJob("typed-4").Team("small").Gpus(4).Types({"A100-80GB"}), 0),
                  Pending(MakeJob("any-1").Team("small").Gpus(1), kHourMs)};
  Plan plan = Engine(Catalog(), Guarded(), nullptr).Schedule(snap, {.explain = true});
  EXPECT_TRUE(plan.preemptions.empty());
  const WaitingJob* typed = FindWaiting(plan, "typed-4");
  ASSERT_NE(typed, nullptr);
  EXPECT_NE(plan.reason(*typed).find("A100-80GB is scarcer than its demand: 8 GPUs in the cluster, 12 asked by "
                                     "running and waiting jobs that can use no other type"),
            std::string::npos)
      << plan.reason(*typed);
  const WaitingJob* any = FindWaiting(plan, "any-1");
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(plan.reason(*any).find("scarcer"), std::string::npos) << "it names no type: " << plan.reason(*any);
  // A second A100 node, as busy: both sides of the count grow.
  snap.nodes.push_back(MakeNode("m", "A100-80GB", 8));
  snap.running.push_back(Running(all, 1, {0, 1, 2, 3, 4, 5, 6, 7}));
  plan = Engine(Catalog(), Guarded(), nullptr).Schedule(snap, {.explain = true});
  typed = FindWaiting(plan, "typed-4");
  ASSERT_NE(typed, nullptr);
  EXPECT_NE(plan.reason(*typed).find("A100-80GB is scarcer than its demand: 16 GPUs in the cluster, 20 asked"),
            std::string::npos)
      << plan.reason(*typed);
}

TEST(StarvationGuard, TheRescuedJobGetsAReservationBackfillCannotTake) {
  // Nothing may be evicted (the running work is not preemptible); a normal blocked job
  // ("first", earlier, another team that holds GPUs) takes the one backfill reservation,
  // and the rescued job still gets its own, ahead of it.
  Snapshot snap = Starving(0);
  for (RunningJob& r : snap.running) {
    JobSpec s = *r.spec;
    s.preemptible = false;
    r.spec = std::make_shared<const JobSpec>(s);
  }
  snap.pending.insert(snap.pending.begin(), Pending(MakeJob("first").Team("big").Gpus(4), 0));
  SchedulerConfig c = Guarded();
  c.backfill_reservations = 1;
  Plan plan = Engine(Catalog(), c, nullptr).Schedule(snap, {.explain = true});
  ASSERT_GE(plan.waiting.size(), 2u);
  EXPECT_EQ(plan.waiting[0].job_id, "new-1");
  EXPECT_NE(plan.waiting[0].estimated_start_ms, kNever);
  EXPECT_NE(plan.reason(plan.waiting[0]).find("first in line: team small has had jobs waiting and no GPU for 2h"),
            std::string::npos)
      << plan.reason(plan.waiting[0]);
  const WaitingJob* first = FindWaiting(plan, "first");
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first->estimated_start_ms, kNever);
}

// The starving team's smallest job asks for the H200s, which work no rule may take holds
// (not preemptible). Its next shape, 4 A100s, is rescued instead, from borrowed work; it
// gets no reservation of its own (the first one tried keeps the rescue's).
TEST(StarvationGuard, WhenTheSmallestJobsTypeCannotBeFreedAnotherShapeIsRescued) {
  Snapshot snap = Starving(0);
  snap.nodes.push_back(MakeNode("h", "H200-141GB", 3));
  JobSpec held =
      MakeJob("h200-held").Team("big").Gpus(2).Types({"H200-141GB"}).Estimate(72 * kHourMs).Limit(96 * kHourMs);
  held.preemptible = false;
  snap.running.push_back(Running(held, 1, {0, 1}));
  snap.pending = {Pending(MakeJob("a100-4").Team("small").Gpus(4).Types({"A100-80GB"}), 0),
                  Pending(MakeJob("h200-3").Team("small").Gpus(3).Types({"H200-141GB"}), kHourMs)};
  Plan plan = Engine(Catalog(), Guarded(), nullptr).Schedule(snap, {.explain = true});
  ASSERT_FALSE(plan.preemptions.empty());
  for (const Preemption& p : plan.preemptions) EXPECT_EQ(p.for_job, "a100-4");
  const WaitingJob* first = FindWaiting(plan, "h200-3");
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first->estimated_start_ms, kNever);  // the H200 job keeps its reservation
  EXPECT_EQ(plan.reservations.size(), 1u);
}

// Teams missing from the quota file get default_team's guarantee: below it long enough,
// they reclaim like a listed team (the starvation guard is off here).
TEST(DefaultTeam, AnUnlistedTeamReclaimsTheDefaultGuarantee) {
  Snapshot snap = Starving(0);
  snap.starving_since.clear();
  for (PendingJob& p : snap.pending) {
    JobSpec s = *p.spec;
    s.team = "newcomers";
    p.spec = std::make_shared<const JobSpec>(s);
  }
  snap.below_guarantee_since["newcomers"] = 0;
  SchedulerConfig c = Guarded();
  c.starvation_bound_ms = 0;
  auto none = QuotaConfig::FromYaml("teams:\n  big: {guaranteed: {any: 0}}\n", Catalog());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(Schedule(snap, c, &*none).preemptions.empty());
  auto with_default =
      QuotaConfig::FromYaml("default_team: {guaranteed: {any: 4}}\nteams:\n  big: {guaranteed: {any: 0}}\n", Catalog());
  ASSERT_TRUE(with_default.ok()) << with_default.status().ToString();
  Plan plan = Schedule(snap, c, &*with_default);
  ASSERT_FALSE(plan.preemptions.empty());
  EXPECT_EQ(plan.preemptions[0].reason, "reclaim");
}

}  // namespace
}  // namespace gantry
