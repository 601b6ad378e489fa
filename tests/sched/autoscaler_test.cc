// The autoscaler's decisions: the cheapest pool that fits, spot only for preemptible work
// with a fall-back to on-demand, the fewest nodes (counting those already requested),
// pools' maxima and minima, no scaling for jobs that will start soon anyway, idle nodes
// returned after the delay, and bounded scale calls when demand comes and goes.
#include "sched/autoscaler.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gantry::testing {
namespace {

constexpr TimeMs kNow = 10 * kHourMs;

NodePool Pool(const std::string& name, const std::string& type, int gpus, Capacity capacity, int max_nodes) {
  NodePool p;
  p.name = name;
  p.type = TypeId(type);
  p.gpus_per_node = gpus;
  p.capacity = capacity;
  p.max_nodes = max_nodes;
  p.labels["pool"] = name;
  return p;
}

// A100 nodes on demand and on spot, T4 nodes on demand.
AutoscalerConfig ThreePools() {
  AutoscalerConfig c;
  c.pools = {Pool("a100", "A100-80GB", 8, Capacity::kOnDemand, 10),
             Pool("a100-spot", "A100-80GB", 8, Capacity::kSpot, 10), Pool("t4", "T4", 4, Capacity::kOnDemand, 10)};
  return c;
}

struct Demand {
  std::vector<JobSpec> specs;
  std::vector<ScalingDemand> list;
  void Add(JobSpec spec, TimeMs waiting_since = kNow - kMinuteMs, TimeMs reserved = kNever) {
    specs.push_back(std::move(spec));
    list.push_back({nullptr, waiting_since, reserved, false});
  }
  const std::vector<ScalingDemand>& get() {
    for (size_t i = 0; i < specs.size(); ++i) list[i].spec = &specs[i];
    return list;
  }
};

JobSpec Job(const std::string& id, int gpus, const std::string& type = "A100-80GB", bool preemptible = true) {
  JobSpec s = MakeJob(id).Gpus(gpus).spec();
  s.request.gpu_types = {type};
  s.preemptible = preemptible;
  return s;
}

TEST(Autoscaler, ABurstGoesToTheCheapestFittingPoolInTheFewestNodes) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  for (int i = 0; i < 10; ++i) d.Add(Job("j" + std::to_string(i), 1));
  d.Add(Job("t", 2, "T4"));
  ScalingPlan plan = PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{1, 2}, {2, 1}})) << "ten 1-GPU jobs: two spot nodes of 8; one T4 node";
  EXPECT_EQ(plan.waiting_for["j9"], "a node from pool a100-spot");
  EXPECT_EQ(plan.waiting_for["t"], "a node from pool t4");
  EXPECT_TRUE(plan.remove.empty());
}

TEST(Autoscaler, NonPreemptibleWorkStaysOffSpot) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  d.Add(Job("train", 8, "A100-80GB", false));
  d.list.push_back({nullptr, kNow - kMinuteMs, kNever, true});  // critical, though preemptible
  d.specs.push_back(Job("critical", 4));
  ScalingPlan plan = PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{0, 2}}));
  EXPECT_EQ(plan.waiting_for["critical"], "a node from pool a100");
}

TEST(Autoscaler, NodesAlreadyRequestedAreFilledBeforeNewOnesAreAskedFor) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  for (int i = 0; i < 10; ++i) d.Add(Job("j" + std::to_string(i), 1));
  std::vector<PoolStatus> status(3);
  status[1].requested = 1;  // 8 GPUs on the way
  ScalingPlan plan = PlanScaling(c, Catalog(), status, d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{1, 1}}));
  status[1].requested = 2;
  plan = PlanScaling(c, Catalog(), status, d.get(), kNow);
  EXPECT_TRUE(plan.add.empty()) << "asked for already: the same demand asks for nothing more";
}

TEST(Autoscaler, ASpotPoolWithoutCapacityKeepsItsJobsWaitingThenOnDemandTakesThem) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  d.Add(Job("j", 4));
  std::vector<PoolStatus> status(3);
  status[1].no_capacity_since = kNow - 2 * kMinuteMs;
  ScalingPlan plan = PlanScaling(c, Catalog(), status, d.get(), kNow);
  EXPECT_TRUE(plan.add.empty());
  EXPECT_EQ(plan.waiting_for["j"], "spot capacity in pool a100-spot (none for 2 min; on-demand after 5 min)");
  status[1].no_capacity_since = kNow - 6 * kMinuteMs;
  plan = PlanScaling(c, Catalog(), status, d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{0, 1}}));
}

TEST(Autoscaler, APoolAtItsMaximumSendsTheRestToTheNextPoolOrSaysSo) {
  AutoscalerConfig c = ThreePools();
  c.pools[1].max_nodes = 1;
  Demand d;
  for (int i = 0; i < 3; ++i) d.Add(Job("big" + std::to_string(i), 8));
  std::vector<PoolStatus> status(3);
  status[0].up = 9;  // on-demand: room for one more node
  ScalingPlan plan = PlanScaling(c, Catalog(), status, d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(plan.waiting_for["big0"], "a node from pool a100-spot");
  EXPECT_EQ(plan.waiting_for["big1"], "a node from pool a100");
  EXPECT_EQ(plan.waiting_for["big2"], "pool a100 at its maximum of 10 nodes");
}

TEST(Autoscaler, GangJobsGetTheirNodesAndJobsNoPoolFitsAskForNothing) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  JobSpec gang = Job("gang", 16);
  gang.request.num_nodes = 2;
  d.Add(gang);
  d.Add(Job("h100", 1, "H100-80GB"));
  JobSpec labelled = Job("labelled", 1);
  labelled.node_selector["zone"] = "b";
  d.Add(labelled);
  ScalingPlan plan = PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{1, 2}}));
  EXPECT_EQ(plan.waiting_for["h100"], "no pool has nodes that fit it");
  EXPECT_EQ(plan.waiting_for["labelled"], "no pool has nodes that fit it");
  c.pools[2].taints = {{"dedicated", "inference"}};
  Demand t4;
  t4.Add(Job("t4", 1, "T4"));
  EXPECT_TRUE(PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), t4.get(), kNow).add.empty())
      << "a tainted pool is only for jobs that tolerate it";
  t4.specs[0].tolerations = {{"dedicated", ""}};
  EXPECT_EQ(PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), t4.get(), kNow).add, (std::map<size_t, int>{{2, 1}}));
}

TEST(Autoscaler, JobsThatJustArrivedOrWillStartSoonAskForNothing) {
  AutoscalerConfig c = ThreePools();
  Demand d;
  d.Add(Job("new", 1), kNow - 10 * kSecondMs);                    // waiting less than scale_up_after
  d.Add(Job("soon", 1), kNow - kHourMs, kNow + kMinuteMs);        // its reservation: before a node is up
  d.Add(Job("later", 1), kNow - kHourMs, kNow + 30 * kMinuteMs);  // reservation far off: a node helps
  ScalingPlan plan = PlanScaling(c, Catalog(), std::vector<PoolStatus>(3), d.get(), kNow);
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{1, 1}}));
  EXPECT_EQ(plan.waiting_for.count("new"), 0u);
  EXPECT_EQ(plan.waiting_for["soon"], "its reservation, sooner than a new node");
  EXPECT_EQ(plan.waiting_for["later"], "a node from pool a100-spot");
}

TEST(Autoscaler, IdleNodesAboveTheMinimumGoBackOldestFirstAndTheMinimumIsKept) {
  AutoscalerConfig c = ThreePools();
  c.pools[0].min_nodes = 1;
  c.pools[2].min_nodes = 2;
  std::vector<PoolStatus> status(3);
  status[0].up = 3;
  status[0].idle = {{"n1", kNow - 11 * kMinuteMs}, {"n2", kNow - 5 * kMinuteMs}, {"n3", kNow - 20 * kMinuteMs}};
  ScalingPlan plan = PlanScaling(c, Catalog(), status, {}, kNow);
  EXPECT_EQ(plan.remove, (std::vector<std::string>{"n3", "n1"}));
  EXPECT_EQ(plan.add, (std::map<size_t, int>{{2, 2}})) << "the T4 pool is brought to its minimum";
  status[0].idle.push_back({"n4", kNow - kHourMs});
  status[0].up = 4;
  plan = PlanScaling(c, Catalog(), status, {}, kNow);
  EXPECT_EQ(plan.remove, (std::vector<std::string>{"n4", "n3", "n1"})) << "never below the minimum of 1";
  Demand d;
  d.Add(Job("j", 1, "A100-80GB", false));  // the on-demand pool is wanted: nothing goes back
  EXPECT_TRUE(PlanScaling(c, Catalog(), status, d.get(), kNow).remove.empty());
}

// Demand that comes and goes every few minutes for two hours: nodes are asked for once and
// given back once, not every time the queue empties.
TEST(Autoscaler, DemandThatComesAndGoesDoesNotMakeThePoolFlap) {
  AutoscalerConfig c;
  c.pools = {Pool("a100", "A100-80GB", 8, Capacity::kOnDemand, 4)};
  c.pools[0].startup_ms = 2 * kMinuteMs;
  PoolStatus pool;
  std::vector<std::pair<TimeMs, int>> arriving;       // requested nodes: when they are up
  std::vector<std::pair<std::string, TimeMs>> nodes;  // up: name, idle since (kNever: busy)
  int ups = 0, downs = 0, next = 0;
  for (TimeMs t = 0; t < 2 * kHourMs; t += 30 * kSecondMs) {
    const bool busy_phase = (t / (4 * kMinuteMs)) % 2 == 0 && t < 90 * kMinuteMs;  // 4 min on, 4 off
    for (auto it = arriving.begin(); it != arriving.end();) {
      if (it->first > t) {
        ++it;
        continue;
      }
      nodes.push_back({"n" + std::to_string(next++), t});
      it = arriving.erase(it);
    }
    for (auto& [name, idle_since] : nodes) idle_since = busy_phase ? kNever : (idle_since == kNever ? t : idle_since);
    Demand d;
    if (busy_phase && nodes.empty()) d.Add(Job("burst", 8), t - kMinuteMs);
    pool.up = static_cast<int>(nodes.size());
    pool.requested = static_cast<int>(arriving.size());
    pool.idle.clear();
    for (const auto& [name, since] : nodes) {
      if (since != kNever) pool.idle.push_back({name, since});
    }
    ScalingPlan plan = PlanScaling(c, Catalog(), {pool}, d.get(), t);
    for (const auto& [p, count] : plan.add) {
      ++ups;
      for (int i = 0; i < count; ++i) arriving.push_back({t + c.pools[0].startup_ms, 0});
    }
    if (!plan.remove.empty()) ++downs;
    std::erase_if(nodes, [&](const auto& node) {
      return std::find(plan.remove.begin(), plan.remove.end(), node.first) != plan.remove.end();
    });
  }
  EXPECT_EQ(ups, 1) << "asked once; the node stays through the 4-minute lulls";
  EXPECT_EQ(downs, 1) << "returned once, 10 minutes after the demand stopped";
}

}  // namespace
}  // namespace gantry::testing
