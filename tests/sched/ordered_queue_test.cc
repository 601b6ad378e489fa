// The ordered pending queue and the teams' clocks on their own (sched/ordered_queue.h,
// sched/team_clocks.h): the one copy the live server and the simulator share.
#include "sched/ordered_queue.h"

#include <gtest/gtest.h>

#include "sched/team_clocks.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

std::vector<std::string> Ids(const Snapshot& snap) {
  std::vector<std::string> ids;
  for (const PendingJob& p : snap.pending) ids.push_back(p.spec->id);
  return ids;
}

struct QueueUnderTest {
  QueueUnderTest() { snap.nodes = {MakeNode("n1", "A100-80GB", 8)}; }
  void Order() { queue.Order(snap, {config, Catalog(), quotas, 8}); }
  Snapshot snap;
  SchedulerConfig config = SchedulerConfig::Builtin();
  QuotaConfig quotas;
  OrderedQueue queue;
};

TEST(OrderedQueue, NewJobsAreMergedByTheirKeysAsOfTheLastRekey) {
  QueueUnderTest q;
  q.config.size_weight = 500;  // keys change over time: a period applies
  q.snap.now_ms = 10 * kMinuteMs;
  q.snap.pending = {Pending(MakeJob("old").Gpus(1), 0), Pending(MakeJob("big").Gpus(8), 0)};
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"big", "old"}));  // the size term
  EXPECT_EQ(q.queue.last_rekey_ms(), 10 * kMinuteMs);
  // A job submitted before "old" but merged later sorts by its age as of the re-key; a job
  // as old as "old" merged a minute later does not pass it.
  q.snap.now_ms += kMinuteMs;
  q.snap.pending.push_back(Pending(MakeJob("same-age").Gpus(1), 0));
  q.snap.pending.push_back(Pending(MakeJob("older").Gpus(1), -kHourMs));
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"big", "older", "old", "same-age"}));
  EXPECT_EQ(q.queue.last_rekey_ms(), 10 * kMinuteMs);  // merged, not re-keyed
}

TEST(OrderedQueue, EveryKeyIsRedoneAfterThePeriodOrWhenInvalidated) {
  QueueUnderTest q;
  q.config.size_weight = 500;
  q.snap.pending = {Pending(MakeJob("a").Gpus(1), 0)};
  q.Order();
  q.snap.now_ms = q.config.recalc_period_ms - 1;
  q.snap.pending.push_back(Pending(MakeJob("b").Gpus(1), 0));
  q.Order();
  EXPECT_EQ(q.queue.last_rekey_ms(), 0);
  q.snap.now_ms = q.config.recalc_period_ms;
  q.Order();
  EXPECT_EQ(q.queue.last_rekey_ms(), q.config.recalc_period_ms);
  q.snap.now_ms += 1000;
  q.queue.Invalidate();  // weights or quotas changed
  q.Order();
  EXPECT_EQ(q.queue.last_rekey_ms(), q.config.recalc_period_ms + 1000);
}

TEST(OrderedQueue, AnOrderThatTimeCannotChangeIsNeverRedone) {
  QueueUnderTest q;  // age alone: submit order at any time
  q.config.fairshare_weight = 0;
  q.config.short_job_weight = 0;
  q.snap.pending = {Pending(MakeJob("b").Gpus(1), 5), Pending(MakeJob("a").Gpus(1), 1)};
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"a", "b"}));
  q.snap.now_ms = 10 * q.config.recalc_period_ms;
  q.snap.pending.push_back(Pending(MakeJob("c").Gpus(1), 3));
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"a", "c", "b"}));
  EXPECT_EQ(q.queue.last_rekey_ms(), 0);
}

TEST(OrderedQueue, AGuaranteeTierThatMovesRekeysAtOnce) {
  QueueUnderTest q;
  auto quotas =
      QuotaConfig::FromYaml("teams:\n  vision: {guaranteed: {any: 4}}\n  nlp: {guaranteed: {any: 4}}\n", Catalog());
  ASSERT_TRUE(quotas.ok());
  q.quotas = *quotas;
  q.config.fairshare_weight = 0;
  q.config.recalc_period_ms = 10 * kHourMs;  // only the tier's move re-keys here
  // Both teams below their guarantees, nlp's job the older: it goes first.
  q.snap.below_guarantee_since = {{"vision", 0}, {"nlp", 1000}};
  q.snap.pending = {Pending(MakeJob("nlp-job").Team("nlp").Gpus(1), 0),
                    Pending(MakeJob("vision-job").Team("vision").Gpus(1), 10)};
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"nlp-job", "vision-job"}));
  // Vision has now been below its guarantee for reclaim_after (tier 2), nlp not yet.
  q.snap.now_ms = q.config.reclaim_after_ms;
  q.Order();
  EXPECT_EQ(q.queue.last_rekey_ms(), q.config.reclaim_after_ms);
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"vision-job", "nlp-job"}));
}

TEST(OrderedQueue, NominateRemoveAndStartsKeepTheRestInOrder) {
  QueueUnderTest q;
  q.config.fairshare_weight = 0;
  for (int i = 0; i < 5; ++i) q.snap.pending.push_back(Pending(MakeJob(std::to_string(i)).Gpus(1), i));
  q.Order();
  q.queue.Nominate(q.snap.pending, "3");  // first in its class at the next Order
  q.queue.Remove(q.snap.pending, {"1"});
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"3", "0", "2", "4"}));
  EXPECT_TRUE(q.snap.pending[0].nominated);
  Plan plan;
  plan.starts.resize(2);
  plan.starts[0].pending_index = 1;  // "0"
  plan.starts[1].pending_index = 3;  // "4"
  q.queue.TakeStarted(q.snap.pending, plan);
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"3", "2"}));
  q.snap.pending.push_back(Pending(MakeJob("5").Gpus(1), 5));
  q.Order();
  EXPECT_EQ(Ids(q.snap), (std::vector<std::string>{"3", "2", "5"}));
}

TEST(TeamClocks, ClocksRunWhileATeamWaitsAndStopWhenItHoldsOrStopsWaiting) {
  SchedulerConfig config = SchedulerConfig::Builtin();
  TeamClocks clocks;
  clocks.Update(1000, {{"vision", {.held_gpus = 0, .guaranteed_gpus = 4}}, {"nlp", {.held_gpus = 2}}});
  Snapshot snap;
  clocks.CopyTo(snap);
  EXPECT_EQ(snap.starving_since, (std::map<std::string, TimeMs>{{"vision", 1000}}));
  EXPECT_EQ(snap.below_guarantee_since, (std::map<std::string, TimeMs>{{"vision", 1000}}));
  // The first threshold: reclaim_after (or the starvation bound, if sooner).
  EXPECT_EQ(clocks.NextThreshold(config, 1000, {}),
            1000 + std::min(config.reclaim_after_ms, config.starvation_bound_ms));
  // Later: vision holds 2 of its 4 (no longer starving, still below); the clock keeps its start.
  clocks.Update(5000, {{"vision", {.held_gpus = 2, .guaranteed_gpus = 4}}});
  clocks.CopyTo(snap);
  EXPECT_TRUE(snap.starving_since.empty());
  EXPECT_EQ(snap.below_guarantee_since.at("vision"), 1000);
  EXPECT_EQ(clocks.NextThreshold(config, 1000 + config.reclaim_after_ms, {}),
            1000 + config.reclaim_after_ms + config.reclaim_patience_ms);
  clocks.Update(6000, {});  // nothing waits
  clocks.CopyTo(snap);
  EXPECT_TRUE(snap.below_guarantee_since.empty());
  EXPECT_EQ(clocks.NextThreshold(config, 6000, {}), kNever);
}

// A starving team's job that work was evicted for, withdrawn before it starts (a tenant
// submitting and cancelling to evict others again and again), restarts the team's clock:
// the next rescue needs another whole bound. Other teams' clocks, and a team that is not
// starving, are left alone.
TEST(TeamClocks, AWithdrawnRescueRestartsItsTeamsStarvationClock) {
  SchedulerConfig config = SchedulerConfig::Builtin();
  TeamClocks clocks;
  clocks.Update(0, {{"late", {.held_gpus = 0}}, {"other", {.held_gpus = 0}}});
  const TimeMs cancelled_at = config.starvation_bound_ms + 1000;
  clocks.Withdrawn("late", cancelled_at);
  clocks.Withdrawn("not-starving", cancelled_at);
  clocks.Update(cancelled_at + 5000, {{"late", {.held_gpus = 0}}, {"other", {.held_gpus = 0}}});
  Snapshot snap;
  clocks.CopyTo(snap);
  EXPECT_EQ(snap.starving_since, (std::map<std::string, TimeMs>{{"late", cancelled_at}, {"other", 0}}));
}

// Past the starvation bound a rescue may be waiting only for a victim to reach min_runtime:
// that instant is a threshold too (a job stopping already, or not preemptible, is no victim).
TEST(TeamClocks, PastABoundAVictimReachingMinRuntimeIsTheNextThreshold) {
  SchedulerConfig config = SchedulerConfig::Builtin();
  config.preempt_to_reclaim = false;
  TeamClocks clocks;
  clocks.Update(0, {{"late", {.held_gpus = 0}}});
  const TimeMs now = config.starvation_bound_ms + 1000;
  std::vector<RunningJob> running = {Running(MakeJob("young").Team("hog"), 0, {0}, now - 1000),
                                     Running(MakeJob("old").Team("hog"), 0, {1}, 0)};
  EXPECT_EQ(clocks.NextThreshold(config, now, running), now - 1000 + config.min_runtime_ms);
  running[0].stop_at_ms = now + 1000;
  EXPECT_EQ(clocks.NextThreshold(config, now, running), kNever);
  // Before the bound, a victim's min_runtime wakes nothing: the bound itself comes first.
  EXPECT_EQ(clocks.NextThreshold(config, 1000, running), config.starvation_bound_ms);
}

}  // namespace
}  // namespace gantry
