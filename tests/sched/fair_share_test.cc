// Fair share: decay with a half-life, exact accrual, the 2^(-U/S) factor, and its effect
// on the queue order.
#include "sched/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched/queue_order.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

TEST(FairShareLedger, DecaysWithTheHalfLife) {
  FairShareLedger ledger(7 * 24 * kHourMs);
  ledger.Advance(0, {});
  // 1 unit per ms for 1 ms, then nothing for one half-life: about half is left.
  ledger.Advance(1, {{"a", 1.0}});
  double after_use = ledger.usage().at("a");
  EXPECT_NEAR(after_use, 1.0, 1e-6);
  ledger.Advance(1 + 7 * 24 * kHourMs, {});
  EXPECT_NEAR(ledger.usage().at("a"), after_use / 2, 1e-9);
}

TEST(FairShareLedger, AccruesExactlyUnderDecay) {
  // Constant rate r over one half-life h: r * h / ln 2 * (1 - 1/2) = r * h / (2 ln 2).
  const double h = 1000;
  FairShareLedger ledger(static_cast<DurationMs>(h));
  ledger.Advance(0, {});
  ledger.Advance(1000, {{"a", 2.0}});
  EXPECT_NEAR(ledger.usage().at("a"), 2.0 * h / (2 * std::log(2.0)), 1e-9);
}

TEST(FairShare, WorkedExampleFromTheHeader) {
  // Weights vision 2, nlp 1; usage 100 and 300: U = 0.25, 0.75; S = 2/3, 1/3.
  auto quotas = QuotaConfig::FromYaml("teams: {vision: {weight: 2}, nlp: {weight: 1}}", Catalog());
  ASSERT_TRUE(quotas.ok());
  auto f = FairShareFactors({{"vision", 100}, {"nlp", 300}}, *quotas);
  EXPECT_NEAR(f.at("vision"), std::exp2(-0.25 / (2.0 / 3)), 1e-12);  // 0.771
  EXPECT_NEAR(f.at("nlp"), std::exp2(-0.75 / (1.0 / 3)), 1e-12);     // 0.210
  EXPECT_NEAR(f.at("vision"), 0.7711, 1e-4);
  EXPECT_NEAR(f.at("nlp"), 0.2102, 1e-4);
}

TEST(FairShare, UsageIsWeightedByGpuPrice) {
  // One H100 (6.88 USD/h) and one T4 (0.53 USD/h) for an hour: rates in USD per ms.
  Snapshot snap;
  snap.nodes = {MakeNode("h", "H100-80GB", 1), MakeNode("t", "T4", 1)};
  RunningJob h100 = Running(MakeJob("a"), 0, {0});
  RunningJob t4 = Running(MakeJob("b"), 1, {0});
  EXPECT_NEAR(UsageRate(h100, snap, Catalog(), true) * kHourMs, 6.88, 1e-9);
  EXPECT_NEAR(UsageRate(t4, snap, Catalog(), true) * kHourMs, 0.53, 1e-9);
  EXPECT_NEAR(UsageRate(t4, snap, Catalog(), false) * kHourMs, 1.0, 1e-9);  // plain GPU-hours
}

TEST(FairShare, LightTeamGoesFirst) {
  // Same class, same age: the team that used less gets the freed GPU.
  auto quotas = QuotaConfig::FromYaml("teams: {heavy: {weight: 1}, light: {weight: 1}}", Catalog());
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 1)};
  snap.team_usage = {{"heavy", 900}, {"light", 100}};
  snap.pending = {Pending(MakeJob("h").Team("heavy"), 0), Pending(MakeJob("l").Team("light"), 0)};
  SchedulerConfig config = MechanismConfig();
  Plan plan = Schedule(snap, config, &*quotas);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job_id, "l");
  config.fairshare_weight = 0;  // without fair share, the id breaks the tie: "h" first
  EXPECT_EQ(Schedule(snap, config, &*quotas).starts[0].job_id, "h");
}

TEST(FairShare, AGuaranteeActsUnderGuaranteeMaxUseAndTheSettingIsReadByName) {
  SchedulerConfig config = MechanismConfig();
  EXPECT_DOUBLE_EQ(config.guarantee_max_use, 0.75) << "as shipped";
  EXPECT_TRUE(GuaranteeActs(1.0, config)) << "no usage";
  EXPECT_TRUE(GuaranteeActs(std::exp2(-0.7), config));
  EXPECT_FALSE(GuaranteeActs(std::exp2(-0.75), config)) << "U/S at the limit";
  config.guarantee_max_use = 0;
  EXPECT_TRUE(GuaranteeActs(0.01, config)) << "0: always";
  const std::string classes = "priority_classes: [{name: medium, rank: 1}]\n";
  auto off = SchedulerConfig::FromYaml(classes + "fair_share: {guarantee_max_use: 0}");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_DOUBLE_EQ(off->guarantee_max_use, 0);
  auto bad = SchedulerConfig::FromYaml(classes + "fair_share: {guarantee_max_use: -1}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("fair_share.guarantee_max_use"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace gantry
