// GPU sharing: time-sliced fractions, MPS thread and memory limits, MIG instances
// (reuse, create, re-partition of an idle GPU), and modes never mixing on one GPU.
#include <gtest/gtest.h>

#include "sched/apply_plan.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

// Runs cycles until no job starts; returns the final snapshot.
Snapshot RunToQuiet(Snapshot snap, const SchedulerConfig& config = MechanismConfig()) {
  for (int i = 0; i < 10; ++i) {
    Plan plan = Schedule(snap, config);
    if (plan.starts.empty()) break;
    ApplyPlan(plan, snap);
  }
  return snap;
}

// A node with two T4s and `jobs` queued in that order.
Snapshot TwoT4sWith(const std::vector<JobSpec>& jobs) {
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  for (size_t i = 0; i < jobs.size(); ++i) snap.pending.push_back(Pending(jobs[i], static_cast<TimeMs>(i)));
  return snap;
}

int GpuOf(const Snapshot& snap, const std::string& id) {
  for (const RunningJob& r : snap.running) {
    if (r.spec->id == id) return r.placement.nodes[0].gpus[0].gpu;
  }
  return -1;
}

SchedulerConfig Packing() {
  SchedulerConfig c = MechanismConfig();
  c.sharing.time_slice_packing = true;
  return c;
}

SharingMode HeldBy(const Snapshot& snap, const std::string& id) {
  for (const RunningJob& r : snap.running) {
    if (r.spec->id == id) return HeldSharing(*r.spec, r.placement);
  }
  return SharingMode::kAuto;
}

TEST(TimeSlice, FractionsPackOntoOneGpuUpToOne) {
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  snap.pending = {Pending(MakeJob("a").Fraction(0.5), 0), Pending(MakeJob("b").Fraction(0.5), 1),
                  Pending(MakeJob("c").Fraction(0.25), 2)};
  Snapshot done = RunToQuiet(snap, Packing());
  EXPECT_EQ(GpuOf(done, "a"), 0);
  EXPECT_EQ(GpuOf(done, "b"), 0);  // 0.5 + 0.5 = 1: GPU 0 is full
  EXPECT_EQ(GpuOf(done, "c"), 1);
  ClusterStatus st = ComputeStatus(done, Catalog());
  EXPECT_DOUBLE_EQ(st.allocated_gpus, 1.25);
}

TEST(TimeSlice, ExclusiveJobsNeverTakeASharedGpu) {
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  snap.pending = {Pending(MakeJob("frac").Fraction(0.25), 0), Pending(MakeJob("whole2").Gpus(2), 1),
                  Pending(MakeJob("whole1").Gpus(1), 2)};
  Plan plan = Schedule(snap);
  EXPECT_EQ(Where(snap, FindStart(plan, "frac")->placement), "t4:0");
  EXPECT_EQ(FindStart(plan, "whole2"), nullptr);
  EXPECT_EQ(Where(snap, FindStart(plan, "whole1")->placement), "t4:1");
}

TEST(Mps, ThreadPercentagesSumToAtMostHundred) {
  Snapshot done = RunToQuiet(TwoT4sWith({MakeJob("a").Mps(0.4), MakeJob("b").Mps(0.4), MakeJob("c").Mps(0.4)}));
  EXPECT_EQ(GpuOf(done, "a"), 0);
  EXPECT_EQ(GpuOf(done, "b"), 0);  // 40 + 40 = 80%
  EXPECT_EQ(GpuOf(done, "c"), 1);  // 120% would not fit
  EXPECT_EQ(done.running[0].placement.nodes[0].gpus[0].mps_thread_percent, 40);
}

TEST(Mps, PinnedMemorySumsToAtMostTheGpu) {
  // T4 has 16 GiB: two clients pinning 10 GiB each cannot share one, though 20% + 20% could.
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  snap.pending = {Pending(MakeJob("a").Mps(0.2, 10 * 1024), 0), Pending(MakeJob("b").Mps(0.2, 10 * 1024), 1)};
  Snapshot done = RunToQuiet(snap);
  EXPECT_EQ(GpuOf(done, "a"), 0);
  EXPECT_EQ(GpuOf(done, "b"), 1);
  EXPECT_EQ(done.running[0].placement.nodes[0].gpus[0].memory_mib, 10 * 1024);
}

TEST(Sharing, TimeSliceAndMpsNeverMixOnOneGpu) {
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  snap.pending = {Pending(MakeJob("ts").Fraction(0.25), 0), Pending(MakeJob("mps").Mps(0.25), 1),
                  Pending(MakeJob("ts2").Fraction(0.25), 2), Pending(MakeJob("mps2").Mps(0.25), 3)};
  Snapshot done = RunToQuiet(snap, Packing());
  EXPECT_EQ(GpuOf(done, "ts"), GpuOf(done, "ts2"));
  EXPECT_EQ(GpuOf(done, "mps"), GpuOf(done, "mps2"));
  EXPECT_NE(GpuOf(done, "ts"), GpuOf(done, "mps"));
}

TEST(TimeSlice, WithoutPackingEachJobHoldsAWholeGpu) {
  // The shipped setting: two time-sliced quarters take a GPU each, held (and billed) whole;
  // a third waits.
  Snapshot done =
      RunToQuiet(TwoT4sWith({MakeJob("a").Fraction(0.25), MakeJob("b").Fraction(0.25), MakeJob("c").Fraction(0.25)}));
  EXPECT_EQ(GpuOf(done, "a"), 0);
  EXPECT_EQ(GpuOf(done, "b"), 1);
  EXPECT_EQ(GpuOf(done, "c"), -1);
  EXPECT_EQ(done.running[0].placement.nodes[0].gpus[0].milli, 1000);
  EXPECT_EQ(done.running[0].placement.nodes[0].gpus[0].memory_mib, 16 * 1024);
}

TEST(AutoSharing, APlainFractionGetsMpsWithItsThreadsAndPinnedMemory) {
  // Four plain quarters on a node that can run MPS share one T4 as MPS clients: 25% of the
  // threads and 16 GiB / 4 = 4 GiB pinned each.
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  for (int i = 0; i < 4; ++i) {
    snap.pending.push_back(Pending(MakeJob("q" + std::to_string(i)).Fraction(0.25, SharingMode::kAuto), i));
  }
  Snapshot done = RunToQuiet(snap);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(GpuOf(done, "q" + std::to_string(i)), 0);
    EXPECT_EQ(HeldBy(done, "q" + std::to_string(i)), SharingMode::kMps);
  }
  const GpuShare& share = done.running[0].placement.nodes[0].gpus[0];
  EXPECT_EQ(share.mps_thread_percent, 25);
  EXPECT_EQ(share.memory_mib, 4 * 1024);
  EXPECT_EQ(share.milli, 250);  // billed as a quarter
}

TEST(AutoSharing, ANodeWithoutMpsTimeSlices) {
  Snapshot snap;
  snap.nodes = {MakeNode("t4", "T4", 2)};
  snap.nodes[0].mps = false;
  snap.pending = {Pending(MakeJob("a").Fraction(0.25, SharingMode::kAuto), 0),
                  Pending(MakeJob("b").Fraction(0.25, SharingMode::kAuto), 1), Pending(MakeJob("m").Mps(0.25), 2)};
  Snapshot done = RunToQuiet(snap);
  EXPECT_EQ(HeldBy(done, "a"), SharingMode::kTimeSlice);
  EXPECT_NE(GpuOf(done, "a"), GpuOf(done, "b"));  // not packed
  EXPECT_EQ(GpuOf(done, "m"), -1);                // an explicit MPS job needs MPS
}

TEST(AutoSharing, ThePoolsSettingThenTheGpuTypesThenTheDefault) {
  SchedulerConfig config = MechanismConfig();
  config.sharing.by_pool = {{"render", SharingMode::kTimeSlice}};
  config.sharing.by_gpu_type = {{"L40S", SharingMode::kTimeSlice}, {"T4", SharingMode::kMps}};
  Node render = MakeNode("render", "T4", 1);
  render.labels["pool"] = "render";
  Snapshot snap;
  snap.nodes = {render, MakeNode("l40s", "L40S", 1), MakeNode("t4", "T4", 1)};
  Snapshot done;
  for (const char* where : {"render", "l40s", "t4"}) {
    snap.pending = {Pending(MakeJob("j").Fraction(0.5, SharingMode::kAuto).Selector("node", where), 0)};
    for (Node& n : snap.nodes) n.labels["node"] = n.id;
    done = RunToQuiet(snap, config);
    ASSERT_EQ(done.running.size(), 1u) << where;
    EXPECT_EQ(HeldBy(done, "j"), std::string(where) == "t4" ? SharingMode::kMps : SharingMode::kTimeSlice) << where;
  }
}

RunningJob RunningMig(const std::string& id, int node, int gpu, const std::string& type, const std::string& profile,
                      int start) {
  RunningJob r;
  r.spec = std::make_shared<const JobSpec>(MakeJob(id).Mig(profile).spec());
  GpuShare share;
  share.gpu = gpu;
  share.mig_profile = Catalog().Find(type)->FindMigProfile(profile);
  share.mig_start = start;
  r.placement.nodes.push_back({.node = node, .gpus = {share}});
  return r;
}

TEST(Mig, ReusesAFreeInstanceOfTheProfile) {
  Snapshot snap;
  snap.nodes = {MakeMigNode("m", "A100-80GB", 1, {0}, {"3g.40gb", "3g.40gb"})};
  snap.running = {RunningMig("r", 0, 0, "A100-80GB", "3g.40gb", 0)};
  snap.pending = {Pending(MakeJob("j").Mig("3g.40gb"))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].placement.nodes[0].gpus[0].mig_start, 4);
  EXPECT_TRUE(plan.mig_changes.empty());
}

TEST(Mig, CreatesAnInstanceInFreeSlotsBesideBusyOnes) {
  Snapshot snap;
  snap.nodes = {MakeMigNode("m", "A100-80GB", 1, {0}, {"3g.40gb"})};
  snap.running = {RunningMig("r", 0, 0, "A100-80GB", "3g.40gb", 0)};
  snap.pending = {Pending(MakeJob("j").Mig("2g.20gb"))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  ASSERT_EQ(plan.mig_changes.size(), 1u);
  EXPECT_TRUE(plan.mig_changes[0].destroy.empty());
  ASSERT_EQ(plan.mig_changes[0].create.size(), 1u);
  EXPECT_EQ(plan.mig_changes[0].create[0].start, 4);
  const GpuShare& share = plan.starts[0].placement.nodes[0].gpus[0];
  EXPECT_EQ(share.milli, 2 * 1000 / 7);  // 2 of 7 compute slices
  EXPECT_EQ(share.memory_mib, 20 * 1024);
}

TEST(Mig, RepartitionsAnIdleGpuAndNeverABusyOne) {
  Snapshot snap;
  snap.nodes = {MakeMigNode("m", "A100-80GB", 2, {0, 1}, {"3g.40gb", "3g.40gb"})};
  snap.running = {RunningMig("r", 0, 0, "A100-80GB", "3g.40gb", 0)};  // GPU 0 is busy
  snap.pending = {Pending(MakeJob("big").Mig("7g.80gb"))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].placement.nodes[0].gpus[0].gpu, 1);
  ASSERT_EQ(plan.mig_changes.size(), 1u);
  EXPECT_EQ(plan.mig_changes[0].gpu, 1);
  EXPECT_EQ(plan.mig_changes[0].destroy.size(), 2u);
  ApplyPlan(plan, snap);
  std::vector<MigPlacement> layout;
  for (const MigInstance& m : snap.nodes[0].gpus[1].mig_instances) layout.push_back(m.placement);
  EXPECT_TRUE(MigLayoutValid(*Catalog().Find("A100-80GB"), layout));
  // A second 7g has nowhere to go: GPU 0 has a busy instance.
  snap.pending = {Pending(MakeJob("big2").Mig("7g.80gb"))};
  plan = Schedule(snap);
  EXPECT_TRUE(plan.starts.empty());
  EXPECT_TRUE(plan.mig_changes.empty());
}

TEST(Mig, WholeGpuJobsAvoidMigGpus) {
  Snapshot snap;
  snap.nodes = {MakeMigNode("m", "A100-80GB", 2, {0}, {})};
  snap.pending = {Pending(MakeJob("two").Gpus(2), 0), Pending(MakeJob("one").Gpus(1), 1)};
  Plan plan = Schedule(snap);
  EXPECT_EQ(FindStart(plan, "two"), nullptr);
  EXPECT_EQ(Where(snap, FindStart(plan, "one")->placement), "m:1");
}

}  // namespace
}  // namespace gantry
