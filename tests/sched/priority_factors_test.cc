// Each priority factor of sched/priority_factors.h alone, by its name in the table, and the
// score as their weighted sum.
#include "sched/priority_factors.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

struct FactorBench {
  SchedulerConfig config = MechanismConfig();
  std::map<std::string, double> fair_share;
  std::map<std::string, int> guarantee_level;
  TimeMs now = 10 * kHourMs;
  int largest_node = 8;

  QueueContext Context() const { return {config, now, largest_node, &fair_share, &guarantee_level}; }
  double Value(const std::string& factor, const JobSpec& spec, TimeMs submit = 0) const {
    PendingJob job = Pending(spec, submit);
    QueueContext ctx = Context();
    TeamTerms team;
    for (const PriorityFactor& f : PriorityFactors()) {
      if (factor == f.name) return f.value(job, ctx, team);
    }
    ADD_FAILURE() << "no factor named " << factor;
    return -1;
  }
};

TEST(PriorityFactors, TheTableSumsAgeSizeFairShareShortJobAndGuarantee) {
  std::vector<std::string> names;
  for (const PriorityFactor& f : PriorityFactors()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"age", "size", "fairshare", "short_job", "guarantee"}));
  // Only age leaves an order once made standing: an ordered queue re-keys for the others.
  for (const PriorityFactor& f : PriorityFactors()) {
    FactorMoves expected = names[0] == f.name                   ? FactorMoves::kNever
                           : std::string(f.name) == "guarantee" ? FactorMoves::kWithGuarantees
                                                                : FactorMoves::kOverTime;
    EXPECT_EQ(f.moves, expected) << f.name;
  }
  // The score is the weighted sum: 1 h of a 7-day age_max, 4 of 8 GPUs, F = 0.25, below.
  FactorBench bench;
  bench.config.age_weight = 7 * 24;
  bench.config.size_weight = 10;
  bench.config.fairshare_weight = 100;
  bench.config.short_job_weight = 0;
  bench.config.guarantee_weight = 1000;
  bench.config.guarantee_max_use = 0;  // the guarantee acts however much ml used
  bench.fair_share["ml"] = 0.25;
  bench.guarantee_level["ml"] = 1;
  PendingJob job = Pending(MakeJob().Gpus(4), bench.now - kHourMs);
  EXPECT_DOUBLE_EQ(QueueScore(job, bench.Context()), 1 + 5 + 25 + 1000);
}

TEST(PriorityFactors, AgeGrowsUntilAgeMax) {
  FactorBench bench;
  bench.config.age_max_ms = 4 * kHourMs;
  EXPECT_DOUBLE_EQ(bench.Value("age", MakeJob(), bench.now), 0.0);
  EXPECT_DOUBLE_EQ(bench.Value("age", MakeJob(), bench.now - kHourMs), 0.25);
  EXPECT_DOUBLE_EQ(bench.Value("age", MakeJob(), bench.now - 9 * kHourMs), 1.0);
  EXPECT_DOUBLE_EQ(bench.Value("age", MakeJob(), bench.now + kHourMs), 0.0) << "a clock that went back";
}

TEST(PriorityFactors, SizeIsTheShareOfTheLargestNode) {
  FactorBench bench;
  EXPECT_DOUBLE_EQ(bench.Value("size", MakeJob().Gpus(2)), 0.25);
  EXPECT_DOUBLE_EQ(bench.Value("size", MakeJob().Gpus(16).Nodes(2)), 1.0);
  EXPECT_DOUBLE_EQ(bench.Value("size", MakeJob().Fraction(0.5)), 0.5 / 8);
  bench.largest_node = 0;  // no nodes yet
  EXPECT_DOUBLE_EQ(bench.Value("size", MakeJob().Gpus(2)), 0.0);
}

TEST(PriorityFactors, FairShareIsTheTeamsFactorAndAnUnknownTeamCountsAsUnused) {
  FactorBench bench;
  bench.fair_share = {{"ml", 0.2}};
  EXPECT_DOUBLE_EQ(bench.Value("fairshare", MakeJob().Team("ml")), 0.2);
  EXPECT_DOUBLE_EQ(bench.Value("fairshare", MakeJob().Team("new-team")), 1.0);
  bench.config.fairshare_weight = 0;
  bench.config.guarantee_max_use = 0;
  EXPECT_DOUBLE_EQ(bench.Value("fairshare", MakeJob().Team("ml")), 0.0) << "not looked up when nothing reads it";
}

TEST(PriorityFactors, ShortJobPrefersFewGpuHoursFromThePredictionThenEstimateThenLimit) {
  FactorBench bench;
  bench.config.short_job_ref_gpu_hours = 2;
  JobSpec job = MakeJob().Gpus(2).Limit(8 * kHourMs);  // 16 GPU-hours by its limit
  EXPECT_DOUBLE_EQ(bench.Value("short_job", job), 2.0 / 18);
  job.estimated_duration_ms = kHourMs;  // 2 GPU-hours by its estimate
  EXPECT_DOUBLE_EQ(bench.Value("short_job", job), 0.5);
  job.predicted_duration_ms = 3 * kHourMs;  // 6 by its prediction
  EXPECT_DOUBLE_EQ(bench.Value("short_job", job), 0.25);
}

TEST(PriorityFactors, GuaranteeIsTheTeamsLevelBelowItsGuarantee) {
  FactorBench bench;
  bench.guarantee_level = {{"below", 1}, {"long-below", 2}};
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("below")), 1.0);
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("long-below")), 2.0);
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("at-or-above")), 0.0);
}

TEST(PriorityFactors, AGuaranteeActsOnlyWhileItsTeamHasUsedLessThanGuaranteeMaxUseOfItsShare) {
  FactorBench bench;
  bench.config.guarantee_max_use = 0.75;
  // F = 2^(-U/S): U/S 0.5 (F 0.707) is under 0.75; U/S 1 (F 0.5) is not; a team with no
  // usage on record (no factor) counts as unused.
  bench.guarantee_level = {{"light", 1}, {"heavy", 2}, {"new", 1}};
  bench.fair_share = {{"light", std::exp2(-0.5)}, {"heavy", 0.5}};
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("light")), 1.0);
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("heavy")), 0.0) << "competes by fair share like a borrower";
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("new")), 1.0);
  bench.config.guarantee_max_use = 0;
  EXPECT_DOUBLE_EQ(bench.Value("guarantee", MakeJob().Team("heavy")), 2.0) << "0: a guarantee always acts";
}

}  // namespace
}  // namespace gantry
