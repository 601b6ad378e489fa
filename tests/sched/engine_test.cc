// The engine on hand-built clusters: the original specification's case, queue order,
// gangs, placement filters and scores, and the reasons jobs wait.
#include "sched/engine.h"

#include <gtest/gtest.h>

#include "sched/apply_plan.h"
#include "sched/queue_order.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

TEST(Engine, OriginalSpecificationCase) {
  // One node with 4 V100-16GB; a HIGH job asking for 2 GPUs starts at once.
  Snapshot snap;
  snap.nodes = {MakeNode("node-0", "V100-16GB", 4)};
  snap.pending = {Pending(MakeJob("train").Class("high").Gpus(2))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "train");
  EXPECT_EQ(plan.starts[0].placement.gpu_count(), 2);
  EXPECT_TRUE(plan.waiting.empty());
  ApplyPlan(plan, snap);
  ClusterStatus st = ComputeStatus(snap, Catalog());
  EXPECT_EQ(st.total_gpus, 4);
  EXPECT_EQ(st.available_gpus, 2);
  EXPECT_DOUBLE_EQ(st.utilization, 0.5);  // 2 of 4 GPUs allocated
  EXPECT_EQ(st.queued, 0);
  EXPECT_EQ(st.running, 1);
  EXPECT_EQ(st.by_type.at("V100-16GB").available, 2);

  // Three more 2-GPU jobs: one fits, two queue with positions 1 and 2.
  snap.pending = {Pending(MakeJob("a").Gpus(2), 1), Pending(MakeJob("b").Gpus(2), 2), Pending(MakeJob("c").Gpus(2), 3)};
  plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "a");
  ASSERT_EQ(plan.waiting.size(), 2u);
  EXPECT_EQ(plan.waiting[0].job_id, "b");
  EXPECT_EQ(plan.waiting[0].position, 1);
  EXPECT_EQ(plan.waiting[1].job_id, "c");
  EXPECT_EQ(plan.waiting[1].position, 2);
}

TEST(Engine, HigherClassGoesFirstWhateverItsAge) {
  Snapshot snap;
  snap.now_ms = 10 * kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 4)};
  snap.pending = {Pending(MakeJob("old-low").Class("low").Gpus(4), 0),
                  Pending(MakeJob("new-critical").Class("critical").Gpus(4), 10 * kHourMs)};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "new-critical");
  EXPECT_EQ(plan.waiting[0].job_id, "old-low");
}

TEST(QueueOrder, WorkedExampleFromTheHeader) {
  SchedulerConfig config = SchedulerConfig::Builtin();
  config.age_weight = 1000;
  config.age_max_ms = 7 * 24 * kHourMs;
  config.size_weight = 500;
  const TimeMs now = 10 * 24 * kHourMs;
  std::vector<PendingJob> q = {Pending(MakeJob("A").Class("high").Gpus(8), now - 24 * kHourMs),
                               Pending(MakeJob("B").Class("high").Gpus(1), now - 84 * kHourMs),
                               Pending(MakeJob("C").Class("critical").Gpus(1), now)};
  config.fairshare_weight = 0;
  config.short_job_weight = 0;
  const QueueContext ctx{config, now, 8, nullptr};
  EXPECT_NEAR(QueueScore(q[0], ctx), 1000.0 / 7 + 500, 1e-9);  // 642.9
  EXPECT_NEAR(QueueScore(q[1], ctx), 500 + 62.5, 1e-9);
  EXPECT_NEAR(QueueScore(q[2], ctx), 62.5, 1e-9);
  std::vector<QueueEntry> order = OrderQueue(q, ctx);
  EXPECT_EQ(q[order[0].pending_index].spec->id, "C");
  EXPECT_EQ(q[order[1].pending_index].spec->id, "A");
  EXPECT_EQ(q[order[2].pending_index].spec->id, "B");
}

TEST(Engine, OlderJobGoesFirstWithinAClass) {
  Snapshot snap;
  snap.now_ms = 48 * kHourMs;
  snap.nodes = {MakeNode("n", "A100-80GB", 4)};
  snap.pending = {Pending(MakeJob("young").Gpus(4), 47 * kHourMs), Pending(MakeJob("old").Gpus(4), 1 * kHourMs)};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "old");
}

TEST(Engine, GangTakesWholeNodesOrNothing) {
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8), MakeNode("c", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("busy").Gpus(4), 0, {0, 1, 2, 3})};
  // 16 GPUs with no node count: the fewest nodes, 2 x 8, on the two empty nodes.
  snap.pending = {Pending(MakeJob("gang").Gpus(16))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(Where(snap, plan.starts[0].placement), "b:0,1,2,3,4,5,6,7;c:0,1,2,3,4,5,6,7");

  // Explicit 3 nodes x 8: node a has only 4 free, so nothing is placed at all.
  snap.pending = {Pending(MakeJob("gang3").Gpus(24).Nodes(3))};
  plan = Schedule(snap);
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.waiting.size(), 1u);
  EXPECT_EQ(plan.reason(plan.waiting[0]).substr(0, 36), "needs 3 nodes with 8 free GPUs each;");
}

TEST(Engine, GangSplitsWhenNoSingleNodeHasRoom) {
  // 8 GPUs wanted, each node has 4 free: 2 x 4 is the fewest nodes that fit.
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("x").Gpus(4), 0, {0, 1, 2, 3}), Running(MakeJob("y").Gpus(4), 1, {4, 5, 6, 7})};
  snap.pending = {Pending(MakeJob("eight").Gpus(8))};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(Where(snap, plan.starts[0].placement), "a:4,5,6,7;b:0,1,2,3");
}

TEST(Engine, FiltersKeepJobsOffUnsuitableNodes) {
  Snapshot snap;
  snap.nodes = {MakeNode("drained", "A100-80GB", 8), MakeNode("sick", "A100-80GB", 2),
                MakeNode("tainted", "A100-80GB", 8), MakeNode("west", "A100-80GB", 8),
                MakeNode("east", "A100-80GB", 8)};
  snap.nodes[0].state = NodeState::kDrained;
  snap.nodes[1].gpus[0].health = GpuHealth::kUnhealthy;
  snap.nodes[1].gpus[1].fenced = true;
  snap.nodes[2].taints = {{"dedicated", "inference"}};
  snap.nodes[3].labels = {{"zone", "west"}};
  snap.nodes[4].labels = {{"zone", "east"}};
  snap.pending = {Pending(MakeJob("east-job").Gpus(8).Selector("zone", "east"), 0),
                  Pending(MakeJob("infer").Gpus(8).Tolerate("dedicated", "inference"), 1),
                  Pending(MakeJob("one").Gpus(1), 2)};
  Plan plan = Schedule(snap);
  ASSERT_EQ(plan.starts.size(), 3u);
  EXPECT_EQ(Where(snap, FindStart(plan, "east-job")->placement), "east:0,1,2,3,4,5,6,7");
  // The tolerating job may use the tainted node (packing prefers it: ties go to the lower index).
  EXPECT_EQ(Where(snap, FindStart(plan, "infer")->placement), "tainted:0,1,2,3,4,5,6,7");
  EXPECT_EQ(Where(snap, FindStart(plan, "one")->placement), "west:0");
}

TEST(Engine, PackingFillsBusyNodesAndSpreadingAvoidsThem) {
  Snapshot snap;
  snap.nodes = {MakeNode("empty", "A100-80GB", 8), MakeNode("busy", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("r").Gpus(6), 1, {0, 1, 2, 3, 4, 5})};
  snap.pending = {Pending(MakeJob("small").Gpus(2))};
  EXPECT_EQ(Where(snap, Schedule(snap).starts[0].placement), "busy:6,7");
  SchedulerConfig spread = MechanismConfig();
  spread.strategy = PlacementStrategy::kSpread;
  EXPECT_EQ(Where(snap, Schedule(snap, spread).starts[0].placement), "empty:0,1");
}

TEST(Engine, CheapestTypeFirstUnlessTheJobStatesAnOrder) {
  Snapshot snap;
  snap.nodes = {MakeNode("h100", "H100-80GB", 8), MakeNode("a100", "A100-80GB", 8)};
  snap.pending = {Pending(MakeJob("any").Gpus(1).Types({"H100-80GB", "A100-80GB"}))};
  EXPECT_EQ(Where(snap, Schedule(snap).starts[0].placement), "a100:0");  // 3.43 < 6.88 USD/h
  snap.pending = {Pending(MakeJob("fast").Gpus(1).Types({"H100-80GB", "A100-80GB"}, /*ordered=*/true))};
  EXPECT_EQ(Where(snap, Schedule(snap).starts[0].placement), "h100:0");
}

TEST(Engine, KeepsMultiGpuJobsInOneNvlinkGroup) {
  // Groups {0-3} and {4-7}; GPUs 0 and 1 are busy. A 4-GPU job takes group 2 whole,
  // not 2,3 + 4,5 across the slower link.
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 8, /*nvlink_groups=*/2)};
  snap.running = {Running(MakeJob("r").Gpus(2), 0, {0, 1})};
  snap.pending = {Pending(MakeJob("four").Gpus(4)), Pending(MakeJob("two").Gpus(2), 1)};
  Plan plan = Schedule(snap);
  EXPECT_EQ(Where(snap, FindStart(plan, "four")->placement), "n:4,5,6,7");
  EXPECT_EQ(Where(snap, FindStart(plan, "two")->placement), "n:2,3");
}

// The reasons name what narrowed the choice: the memory asked for (not just the one type
// that has it), and GPUs that are healthy but in MIG mode (not "too few healthy GPUs").
TEST(Engine, ReasonsNameMemoryAndMigModeForWhatTheyAre) {
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeMigNode("h", "H100-80GB", 1, {0}, {"7g.80gb"})};
  snap.running = {Running(MakeJob("r").Gpus(8), 0, {0, 1, 2, 3, 4, 5, 6, 7})};
  snap.pending = {Pending(MakeJob("big-memory").GpuMemoryMib(100 * 1024), 0),
                  Pending(MakeJob("whole").Types({"H100-80GB"}), 1)};
  Plan plan = Schedule(snap);
  EXPECT_NE(
      plan.reason(*FindWaiting(plan, "big-memory")).find("with 100 GB of GPU memory; no node has type H200-141GB"),
      std::string::npos)
      << plan.reason(*FindWaiting(plan, "big-memory"));
  std::string whole = plan.reason(*FindWaiting(plan, "whole"));
  EXPECT_NE(whole.find("1 GPUs in MIG mode"), std::string::npos) << whole;
  EXPECT_EQ(whole.find("healthy"), std::string::npos) << whole;
}

TEST(Engine, PreferredLabelsWeighIn) {
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  snap.nodes[1].labels = {{"rack", "r7"}};
  snap.pending = {Pending(MakeJob("j").Gpus(1).Prefer("rack", "r7", 50))};
  EXPECT_EQ(Where(snap, Schedule(snap).starts[0].placement), "b:0");
}

TEST(Engine, ExplainsWhyJobsWait) {
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("t", "T4", 4), MakeNode("d", "H100-80GB", 8)};
  snap.nodes[2].state = NodeState::kDown;
  snap.running = {Running(MakeJob("r").Gpus(8), 0, {0, 1, 2, 3, 4, 5, 6, 7})};
  snap.pending = {Pending(MakeJob("h200").Types({"H200-141GB"}), 0), Pending(MakeJob("big").Gpus(8).Types({"T4"}), 1),
                  Pending(MakeJob("down").Types({"H100-80GB"}), 2),
                  Pending(MakeJob("busy").Gpus(8).Types({"A100-80GB"}), 3)};
  Plan plan = Schedule(snap);
  EXPECT_TRUE(plan.starts.empty());
  EXPECT_EQ(FindWaiting(plan, "h200")->code, WaitCode::kNeverFits);
  EXPECT_NE(plan.reason(*FindWaiting(plan, "h200")).find("no node has type H200-141GB"), std::string::npos);
  EXPECT_EQ(FindWaiting(plan, "big")->code, WaitCode::kNeverFits);
  EXPECT_NE(plan.reason(*FindWaiting(plan, "big")).find("larger than any node"), std::string::npos);
  EXPECT_EQ(FindWaiting(plan, "down")->code, WaitCode::kNoSchedulableNode) << plan.reason(*FindWaiting(plan, "down"));
  const WaitingJob* busy = FindWaiting(plan, "busy");
  EXPECT_EQ(busy->code, WaitCode::kNoCapacity);
  EXPECT_EQ(plan.reason(*busy).substr(0, 96),
            "needs 8 GPUs on one node; none free now (0/3 nodes fit: 2 wrong GPU type, 1 too few free GPUs); ");
  EXPECT_NE(plan.reason(*busy).find("reserved for 1970-01-02T00:00:00Z on a"), std::string::npos) << plan.reason(*busy);
}

TEST(Engine, SameInputSamePlan) {
  Snapshot snap;
  for (int i = 0; i < 6; ++i) snap.nodes.push_back(MakeNode("n" + std::to_string(i), i % 2 ? "T4" : "A100-80GB", 4));
  for (int i = 0; i < 30; ++i) {
    snap.pending.push_back(Pending(MakeJob("j" + std::to_string(i)).Gpus(1 + i % 3), i % 5));
  }
  Plan a = Schedule(snap);
  Plan b = Schedule(snap);
  ASSERT_EQ(a.starts.size(), b.starts.size());
  for (size_t i = 0; i < a.starts.size(); ++i) {
    EXPECT_EQ(a.starts[i].job_id, b.starts[i].job_id);
    EXPECT_EQ(Where(snap, a.starts[i].placement), Where(snap, b.starts[i].placement));
  }
  ASSERT_EQ(a.waiting.size(), b.waiting.size());
  for (size_t i = 0; i < a.waiting.size(); ++i) EXPECT_EQ(a.reason(a.waiting[i]), b.reason(b.waiting[i]));
}

}  // namespace
}  // namespace gantry
