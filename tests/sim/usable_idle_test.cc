// The simulator's count of idle GPUs that waiting work could have used (sim/usable_idle.h):
// by GPU type, by the room a gang's parts need on each node, and no more than is asked.
#include "sim/usable_idle.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gantry {
namespace {

using testing::MakeJob;

class UsableIdleTest : public ::testing::Test {
 protected:
  GpuTypeId Type(const std::string& name) const { return catalog_.Find(name)->id; }
  std::vector<int> EightPerType() const {
    std::vector<int> most(catalog_.size(), 0);
    for (const GpuType& t : catalog_.types()) most[t.id] = 8;
    return most;
  }
  void Add(const JobSpec& spec) { idle_.Add(spec, JobGpuShare(spec.request, catalog_)); }

  GpuCatalog catalog_ = GpuCatalog::Builtin();
  UsableIdle idle_{catalog_, EightPerType()};
};

TEST_F(UsableIdleTest, AnIdleGpuOfATypeNoWaitingJobAllowsDoesNotCount) {
  const std::vector<GpuTypeId> types = {Type("T4"), Type("H100-80GB")};
  Add(MakeJob("h").Gpus(1).Types({"H100-80GB"}));
  EXPECT_DOUBLE_EQ(idle_.Count(types, {4, 0}), 0);  // only the T4s are idle
  EXPECT_DOUBLE_EQ(idle_.Count(types, {4, 1}), 1);  // the H100 counts
  Add(MakeJob("any").Gpus(2));                      // no type named: any
  EXPECT_DOUBLE_EQ(idle_.Count(types, {4, 1}), 3);  // 3 GPUs asked in all
}

TEST_F(UsableIdleTest, AWholeNodeJobCannotUseScatteredGpusButASmallJobCan) {
  const std::vector<GpuTypeId> types(3, Type("A100-80GB"));
  Add(MakeJob("big").Gpus(8).Nodes(1));
  EXPECT_DOUBLE_EQ(idle_.Count(types, {3, 3, 2}), 0);
  EXPECT_DOUBLE_EQ(idle_.Count(types, {8, 3, 2}), 8);  // the whole idle node
  Add(MakeJob("one").Gpus(1));
  EXPECT_DOUBLE_EQ(idle_.Count(types, {3, 3, 2}), 1);  // as much as is asked
}

TEST_F(UsableIdleTest, AGangsEqualPartsNeedEnoughNodesWithRoomForOne) {
  const std::vector<GpuTypeId> types(3, Type("A100-80GB"));
  Add(MakeJob("gang").Gpus(8).Nodes(2));               // 2 nodes x 4
  EXPECT_DOUBLE_EQ(idle_.Count(types, {4, 3, 3}), 0);  // one node has room for a part
  EXPECT_DOUBLE_EQ(idle_.Count(types, {4, 5, 3}), 8);  // two do: their 9 idle, 8 asked
  const std::vector<GpuTypeId> mixed = {Type("A100-80GB"), Type("H100-80GB"), Type("A100-80GB")};
  EXPECT_DOUBLE_EQ(idle_.Count(mixed, {4, 4, 0}), 0);  // a gang runs on one GPU type
  Add(MakeJob("spread").Gpus(4));                      // as few nodes as possible: 1x4, 2x2, 4x1
  EXPECT_DOUBLE_EQ(idle_.Count(types, {2, 1, 1}), 0);  // none of those fits on 3 nodes
  EXPECT_DOUBLE_EQ(idle_.Count(types, {2, 2, 1}), 4);  // 2 x 2 does; the third node's GPU is no use
}

TEST_F(UsableIdleTest, AShareCountsWhatItAsksAndLeavingTheQueueTakesItOut) {
  const std::vector<GpuTypeId> types(1, Type("A100-80GB"));
  const JobSpec quarter = MakeJob("q").Fraction(0.25);
  Add(quarter);
  EXPECT_DOUBLE_EQ(idle_.Count(types, {2}), 0.25);
  idle_.Remove(quarter, 0.25);
  EXPECT_DOUBLE_EQ(idle_.Count(types, {2}), 0);
  Add(MakeJob("slice").Mig("3g.40gb"));  // needs a GPU in MIG mode, never idle here
  EXPECT_DOUBLE_EQ(idle_.Count(types, {2}), 0);
}

}  // namespace
}  // namespace gantry
