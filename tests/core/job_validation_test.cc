// Job validation at submission: every refusal names its field.
#include <gtest/gtest.h>

#include "core/scheduler_config.h"
#include "sched/engine.h"
#include "test_util.h"

namespace gantry {
namespace {

using testing::MakeJob;
using testing::MakeNode;

Status Validate(JobSpec spec) { return ValidateJobSpec(spec, GpuCatalog::Builtin(), SchedulerConfig::Builtin()); }

void ExpectRefused(JobSpec spec, const std::string& field, const std::string& words) {
  Status s = Validate(spec);
  ASSERT_FALSE(s.ok()) << "accepted, expected refusal on " << field;
  EXPECT_EQ(s.field(), field) << s.ToString();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.ToString();
}

TEST(JobValidation, AcceptsAndFillsDefaults) {
  JobSpec spec = MakeJob().Gpus(2).Class("").Limit(0);
  ASSERT_TRUE(ValidateJobSpec(spec, GpuCatalog::Builtin(), SchedulerConfig::Builtin()).ok());
  EXPECT_EQ(spec.priority_class, "medium");
  EXPECT_EQ(spec.time_limit_ms, 24 * kHourMs);
  JobSpec unlimited = MakeJob().Limit(kTimeLimitAsAllowed);
  ASSERT_TRUE(ValidateJobSpec(unlimited, GpuCatalog::Builtin(), SchedulerConfig::Builtin()).ok());
  EXPECT_EQ(unlimited.time_limit_ms, SchedulerConfig::Builtin().max_time_limit_ms);
}

TEST(JobValidation, RefusesImpossibleGpuCounts) {
  ExpectRefused(MakeJob().Gpus(0), "gpus", "at least 1");
  ExpectRefused(MakeJob().Gpus(-3), "gpus", "got -3");
  ExpectRefused(MakeJob().Gpus(1000000), "gpus", "more than");
  ExpectRefused(MakeJob().Gpus(6).Nodes(4), "nodes", "do not split evenly");
}

TEST(JobValidation, RefusesBadFractions) {
  JobSpec over = MakeJob().Fraction(0.5);
  over.request.gpu_milli = 1500;
  ExpectRefused(over, "gpu_fraction", "(0, 1]");
  JobSpec zero = MakeJob().Fraction(0.5);
  zero.request.gpu_milli = 0;
  ExpectRefused(zero, "gpu_fraction", "(0, 1]");
  ExpectRefused(MakeJob().Fraction(0.5).Gpus(2), "gpus", "exactly one GPU");
  JobSpec threads = MakeJob().Mps(0.5);
  threads.request.mps_thread_percent = 150;
  ExpectRefused(threads, "mps_thread_percent", "1..100");
}

TEST(JobValidation, RefusesUnknownNames) {
  ExpectRefused(MakeJob().Types({"H300"}), "gpu_types", "unknown GPU type 'H300'");
  // Each type once, by name or alias: a list is never longer than the catalog (a flood of
  // jobs with ever longer lists would otherwise grow every queue view).
  ExpectRefused(MakeJob().Types({"H100-80GB", "A100-80GB", "H100-80GB"}), "gpu_types", "'H100-80GB' is listed twice");
  ExpectRefused(MakeJob().Class("urgent"), "priority", "unknown priority class 'urgent'");
  ExpectRefused(MakeJob().Mig("1g.10gb").Types({"T4"}), "mig_profile", "no allowed GPU type has MIG profile");
  ExpectRefused(MakeJob().Mig("9g.99gb"), "mig_profile", "9g.99gb");
}

TEST(JobValidation, RefusesMemoryNoTypeHas) {
  ExpectRefused(MakeJob().GpuMemoryMib(200 * 1024), "gpu_memory_gb", "no allowed GPU type");
  ExpectRefused(MakeJob().Types({"T4"}).GpuMemoryMib(20 * 1024), "gpu_memory_gb", "no allowed GPU type");
  // A quarter of a T4 is 4 GiB: 6 GiB needs a bigger GPU.
  ExpectRefused(MakeJob().Fraction(0.25).Types({"T4"}).GpuMemoryMib(6 * 1024), "gpu_memory_gb", "no allowed GPU type");
  EXPECT_TRUE(Validate(MakeJob().Fraction(0.25).Types({"A100-80GB"}).GpuMemoryMib(6 * 1024)).ok());
}

TEST(JobValidation, RefusesTimeLimitsBeyondTheMaximum) {
  ExpectRefused(MakeJob().Limit(30 * 24 * kHourMs), "time_limit", "exceeds the maximum");
  ExpectRefused(MakeJob().User(""), "user", "required");
  ExpectRefused(MakeJob().Team(""), "team", "required");
}

TEST(Admission, RefusesWhatTheClusterCanNeverHold) {
  std::vector<Node> nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8), MakeNode("t", "T4", 4)};
  const GpuCatalog& c = GpuCatalog::Builtin();
  EXPECT_TRUE(CheckAdmissible(MakeJob().Gpus(16), nodes, c).ok());
  EXPECT_TRUE(CheckAdmissible(MakeJob().Gpus(16).Nodes(2), nodes, c).ok());
  Status too_many_nodes = CheckAdmissible(MakeJob().Gpus(3).Nodes(3).Types({"A100-80GB"}), nodes, c);
  EXPECT_EQ(too_many_nodes.field(), "nodes");
  Status too_big = CheckAdmissible(MakeJob().Gpus(24), nodes, c);
  EXPECT_EQ(too_big.field(), "gpus");
  EXPECT_NE(too_big.message().find("A100-80GB: 2 nodes, 16 GPUs"), std::string::npos) << too_big.message();
  EXPECT_EQ(CheckAdmissible(MakeJob().Types({"H100-80GB"}), nodes, c).field(), "gpu_types");
  EXPECT_EQ(CheckAdmissible(MakeJob().Mig("1g.10gb"), nodes, c).field(), "mig_profile");  // no GPU in MIG mode
}

}  // namespace
}  // namespace gantry
