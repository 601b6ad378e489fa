// Reservations and backfill: the blocked job's start time, which jobs may jump ahead,
// and strict order when backfill is off.
#include <gtest/gtest.h>

#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

// These tests are about backfill: no preemption (it is tested in preemption_test.cc).
SchedulerConfig NoPreemption() { return MechanismConfig(); }

// Node "a" (8 A100s): a job holds GPUs 0-5 until 2h. At 30m: BIG (high, 8 GPUs) is blocked;
// LONG (2 GPUs, 5h) would still run at 2h; SHORT (2 GPUs, 1h, ends 1h30) fits before it.
Snapshot BackfillCase() {
  Snapshot snap;
  snap.now_ms = 30 * kMinuteMs;
  snap.nodes = {MakeNode("a", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("r").Gpus(6).Estimate(2 * kHourMs), 0, {0, 1, 2, 3, 4, 5}, 0)};
  snap.pending = {Pending(MakeJob("big").Class("high").Gpus(8).Estimate(4 * kHourMs), 10 * kMinuteMs),
                  Pending(MakeJob("long").Gpus(2).Estimate(5 * kHourMs), 11 * kMinuteMs),
                  Pending(MakeJob("short").Gpus(2).Estimate(1 * kHourMs), 12 * kMinuteMs)};
  return snap;
}

TEST(Backfill, ShortJobFillsTheHoleWithoutDelayingTheReservation) {
  Snapshot snap = BackfillCase();
  Plan plan = Schedule(snap, NoPreemption());
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job_id, "big");
  EXPECT_EQ(plan.reservations[0].start_ms, 2 * kHourMs);
  EXPECT_EQ(Where(snap, plan.reservations[0].placement), "a:0,1,2,3,4,5,6,7");
  const StartDecision* s = FindStart(plan, "short");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->backfilled);
  EXPECT_EQ(Where(snap, s->placement), "a:6,7");
  const WaitingJob* big = FindWaiting(plan, "big");
  EXPECT_EQ(big->position, 1);
  EXPECT_EQ(big->estimated_start_ms, 2 * kHourMs);
  const WaitingJob* lng = FindWaiting(plan, "long");
  EXPECT_EQ(lng->code, WaitCode::kBehindReservation);
  EXPECT_NE(plan.reason(*lng).find("would still run at 1970-01-01T02:00:00Z"), std::string::npos) << plan.reason(*lng);
}

TEST(Backfill, StrictOrderWhenBackfillIsOff) {
  SchedulerConfig fifo = NoPreemption();
  fifo.backfill_enabled = false;
  Plan plan = Schedule(BackfillCase(), fifo);
  EXPECT_TRUE(plan.starts.empty());
  EXPECT_EQ(FindWaiting(plan, "short")->code, WaitCode::kStrictOrder);
  EXPECT_NE(plan.reason(*FindWaiting(plan, "short")).find("behind higher-ranked job big"), std::string::npos);
  EXPECT_EQ(FindWaiting(plan, "big")->estimated_start_ms, 2 * kHourMs);  // still told when it starts
}

TEST(Backfill, ReservationUsesTimeLimitsWhenNoEstimate) {
  Snapshot snap = BackfillCase();
  JobSpec spec = *snap.running[0].spec;
  spec.estimated_duration_ms = 0;
  spec.time_limit_ms = 6 * kHourMs;
  snap.running[0].spec = std::make_shared<const JobSpec>(spec);
  Plan plan = Schedule(snap, NoPreemption());
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start_ms, 6 * kHourMs);
  EXPECT_NE(FindStart(plan, "long"), nullptr);  // ends at 5h30 < 6h: may run now
}

TEST(Reservation, WorkedExampleFromTheHeader) {
  // node-3: 2 idle GPUs, 6 busy until 10:00, 10:30 (x3), 11:00 (x2); node-5: 8 busy until
  // 12:00. An 8-GPU job is reserved for 11:00 on node-3.
  const TimeMs h = kHourMs;
  Snapshot snap;
  snap.now_ms = 9 * h;
  snap.nodes = {MakeNode("node-3", "A100-80GB", 8), MakeNode("node-5", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("j1").Gpus(1).Estimate(2 * h), 0, {2}, 8 * h),
                  Running(MakeJob("j2").Gpus(3).Estimate(2 * h + 30 * kMinuteMs), 0, {3, 4, 5}, 8 * h),
                  Running(MakeJob("j3").Gpus(2).Estimate(3 * h), 0, {6, 7}, 8 * h),
                  Running(MakeJob("j4").Gpus(8).Estimate(4 * h), 1, {0, 1, 2, 3, 4, 5, 6, 7}, 8 * h)};
  snap.pending = {Pending(MakeJob("eight").Gpus(8), 9 * h)};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start_ms, 11 * h);
  EXPECT_EQ(Where(snap, plan.reservations[0].placement), "node-3:0,1,2,3,4,5,6,7");
}

TEST(Reservation, SeveralBlockedJobsHoldDifferentGpus) {
  SchedulerConfig config = MechanismConfig();
  config.backfill_reservations = 2;
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("ra").Gpus(8).Estimate(1 * kHourMs), 0, {0, 1, 2, 3, 4, 5, 6, 7}),
                  Running(MakeJob("rb").Gpus(8).Estimate(3 * kHourMs), 1, {0, 1, 2, 3, 4, 5, 6, 7})};
  snap.pending = {Pending(MakeJob("first").Gpus(8), 0), Pending(MakeJob("second").Gpus(8), 1)};
  Plan plan = Schedule(snap, config);
  ASSERT_EQ(plan.reservations.size(), 2u);
  EXPECT_EQ(plan.reservations[0].start_ms, 1 * kHourMs);
  EXPECT_EQ(Where(snap, plan.reservations[0].placement).substr(0, 2), "a:");
  EXPECT_EQ(plan.reservations[1].start_ms, 3 * kHourMs);
  EXPECT_EQ(Where(snap, plan.reservations[1].placement).substr(0, 2), "b:");
}

}  // namespace
}  // namespace gantry
