// Each static filter plugin of sched/plugins.h alone, by its name in the table: a node it
// lets through and one it stops, with the words it adds to a waiting job's reason; and the
// placer's fast path (PassesStaticFilters) agreeing with the table on every case here but
// the filters it leaves to its callers.
#include <gtest/gtest.h>

#include "core/node_pools.h"
#include "sched/plugins.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

// One node, its usage, and a job's demand on it, as the filters see them.
struct FilterCase {
  Node node;
  JobSpec spec;

  bool Passes(const std::string& filter) const {
    Snapshot snap;
    snap.nodes = {node};
    ClusterState state(snap, Catalog());
    Demand d = CompileDemand(spec, Catalog(), state.max_gpus_per_type());
    d.spot_ok = spec.preemptible;
    size_t count = 0;
    const FilterPlugin* filters = StaticFilters(&count);
    for (size_t i = 0; i < count; ++i) {
      if (filter != filters[i].name) continue;
      bool passes = filters[i].passes(snap.nodes[0], state.node(0), d);
      // The fast path skips the node-state filter (its indexes hold schedulable nodes only)
      // and the MIG-mode one (its callers look at each GPU's mode).
      if (node.schedulable() && filter != "MigMode") {
        EXPECT_EQ(PassesStaticFilters(snap.nodes[0], state.node(0), d),
                  FailedStaticFilter(snap.nodes[0], state.node(0), d) == nullptr)
            << filter;
      }
      return passes;
    }
    ADD_FAILURE() << "no filter named " << filter;
    return false;
  }
};

FilterCase Case(JobSpec spec, Node node = MakeNode("n", "A100-80GB", 8)) { return {std::move(node), std::move(spec)}; }

std::string Failure(const std::string& name) {
  size_t count = 0;
  const FilterPlugin* filters = StaticFilters(&count);
  for (size_t i = 0; i < count; ++i) {
    if (name == filters[i].name) return filters[i].failure;
  }
  return "";
}

TEST(FilterPlugins, TheTableNamesEightFiltersCheapestFirst) {
  size_t count = 0;
  const FilterPlugin* filters = StaticFilters(&count);
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) names.push_back(filters[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"GpuType", "Containers", "Capacity", "NodeSelector", "Taints", "NodeSize",
                                             "MigMode", "NodeState"}));
}

TEST(FilterPlugins, GpuTypeStopsNodesOfTypesTheJobDidNotAllow) {
  EXPECT_TRUE(Case(MakeJob().Gpus(1)).Passes("GpuType"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1).Types({"H100-80GB", "A100-80GB"})).Passes("GpuType"));
  EXPECT_FALSE(Case(MakeJob().Gpus(1).Types({"H100-80GB"})).Passes("GpuType"));
  Node cpu_only = MakeNode("cpu", "A100-80GB", 0);
  EXPECT_FALSE(Case(MakeJob().Gpus(1), cpu_only).Passes("GpuType")) << "a node without GPUs";
  EXPECT_EQ(Failure("GpuType"), "wrong GPU type");
}

TEST(FilterPlugins, ContainersStopsContainerJobsWhereTheProbeFailed) {
  JobSpec boxed = MakeJob().Gpus(1);
  boxed.container.image = "localhost/train:1";
  Node no_runtime = MakeNode("n", "A100-80GB", 8);
  no_runtime.containers = false;
  EXPECT_TRUE(Case(boxed).Passes("Containers"));
  EXPECT_FALSE(Case(boxed, no_runtime).Passes("Containers"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1), no_runtime).Passes("Containers")) << "a job on the node itself";
  EXPECT_EQ(Failure("Containers"), "cannot run containers");
}

TEST(FilterPlugins, CapacityKeepsWorkThatMayNotBeEvictedOffSpotNodes) {
  Node spot = MakeNode("spot", "A100-80GB", 8);
  spot.labels[kCapacityLabel] = "spot";
  JobSpec steady = MakeJob().Gpus(1);
  steady.preemptible = false;
  EXPECT_FALSE(Case(steady, spot).Passes("Capacity"));
  EXPECT_TRUE(Case(steady).Passes("Capacity")) << "on-demand capacity";
  EXPECT_TRUE(Case(MakeJob().Gpus(1), spot).Passes("Capacity")) << "preemptible work";
  EXPECT_EQ(Failure("Capacity"), "spot node, job not preemptible");
}

TEST(FilterPlugins, NodeSelectorNeedsEveryLabelWithItsValue) {
  Node labelled = MakeNode("n", "A100-80GB", 8);
  labelled.labels = {{"zone", "a"}, {"rack", "7"}};
  EXPECT_TRUE(Case(MakeJob().Gpus(1).Selector("zone", "a"), labelled).Passes("NodeSelector"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1).Selector("zone", "a").Selector("rack", "7"), labelled).Passes("NodeSelector"));
  EXPECT_FALSE(Case(MakeJob().Gpus(1).Selector("zone", "b"), labelled).Passes("NodeSelector"));
  EXPECT_FALSE(Case(MakeJob().Gpus(1).Selector("zone", "a").Selector("ssd", "yes"), labelled).Passes("NodeSelector"));
  EXPECT_EQ(Failure("NodeSelector"), "labels do not match");
}

TEST(FilterPlugins, TaintsNeedAToleration) {
  Node tainted = MakeNode("n", "A100-80GB", 8);
  tainted.taints = {{"reserved", "infra"}};
  EXPECT_FALSE(Case(MakeJob().Gpus(1), tainted).Passes("Taints"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1).Tolerate("reserved", "infra"), tainted).Passes("Taints"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1).Tolerate("reserved"), tainted).Passes("Taints")) << "any value of the key";
  EXPECT_FALSE(Case(MakeJob().Gpus(1).Tolerate("reserved", "ml"), tainted).Passes("Taints"));
  EXPECT_EQ(Failure("Taints"), "untolerated taint");
}

TEST(FilterPlugins, NodeSizeStopsNodesTooSmallEvenWhenEmpty) {
  EXPECT_TRUE(Case(MakeJob().Gpus(8)).Passes("NodeSize"));
  EXPECT_FALSE(Case(MakeJob().Gpus(4).Nodes(1), MakeNode("small", "A100-80GB", 2)).Passes("NodeSize"));
  EXPECT_TRUE(Case(MakeJob().Gpus(4), MakeNode("small", "A100-80GB", 2)).Passes("NodeSize"))
      << "with no node count and no node of 4, it may spread over nodes of 2";
  EXPECT_TRUE(Case(MakeJob().Gpus(4).Nodes(2), MakeNode("small", "A100-80GB", 2)).Passes("NodeSize"))
      << "2 GPUs a node for a 2-node gang";
  EXPECT_FALSE(Case(MakeJob().Gpus(1).Cpus(65)).Passes("NodeSize")) << "64 CPUs";
  EXPECT_TRUE(Case(MakeJob().Fraction(0.5), MakeNode("one", "A100-80GB", 1)).Passes("NodeSize"));
  EXPECT_EQ(Failure("NodeSize"), "too small in total");
}

TEST(FilterPlugins, MigModeNeedsAGpuInMigModeForAMigRequest) {
  Node mig = MakeMigNode("mig", "A100-80GB", 8, {0}, {"3g.40gb", "3g.40gb"});
  EXPECT_TRUE(Case(MakeJob().Mig("3g.40gb"), mig).Passes("MigMode"));
  EXPECT_FALSE(Case(MakeJob().Mig("3g.40gb")).Passes("MigMode"));
  EXPECT_TRUE(Case(MakeJob().Gpus(1)).Passes("MigMode")) << "whole GPUs need no MIG";
  EXPECT_EQ(Failure("MigMode"), "no GPU in MIG mode");
}

TEST(FilterPlugins, NodeStateStopsDrainingDrainedAndDownNodes) {
  EXPECT_TRUE(Case(MakeJob().Gpus(1)).Passes("NodeState"));
  for (NodeState s : {NodeState::kDraining, NodeState::kDrained, NodeState::kDown}) {
    Node n = MakeNode("n", "A100-80GB", 8);
    n.state = s;
    EXPECT_FALSE(Case(MakeJob().Gpus(1), n).Passes("NodeState")) << ToString(s);
  }
  EXPECT_EQ(Failure("NodeState"), "drained or down");
}

}  // namespace
}  // namespace gantry
