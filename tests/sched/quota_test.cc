// Quotas: guarantees per type and "any", borrowing limits, hard maximums, project and
// user limits, class run-time limits, and the refusal of jobs no limit could ever allow.
#include <gtest/gtest.h>

#include "core/quota_config.h"
#include "sched/team_clocks.h"
#include "sched/usage.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

QuotaConfig Quotas() {
  auto q = QuotaConfig::FromYaml(R"(
user_max_gpus: 6
class_max_runtime: {high: 48h}
teams:
  vision:
    guaranteed: {A100-80GB: 4, any: 2}
    borrow_limit: 4
    max_gpus: 9
    weight: 2
    project_max_gpus: {detector: 3}
  nlp:
    guaranteed: {any: 2}
)",
                                 Catalog());
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return *q;
}

TEST(QuotaConfig, ParsesAndRefusesBadFields) {
  QuotaConfig q = Quotas();
  EXPECT_DOUBLE_EQ(q.Team("vision").guaranteed_total(), 6);  // 4 A100 + 2 any
  EXPECT_DOUBLE_EQ(q.Team("vision").ceiling(), 9);           // min(max 9, 6 + 4)
  EXPECT_DOUBLE_EQ(q.Team("nlp").ceiling(), kUnlimited);     // no borrow limit, no max
  EXPECT_DOUBLE_EQ(q.Team("unknown").weight, 1);
  auto bad_type = QuotaConfig::FromYaml("teams: {x: {guaranteed: {H300: 1}}}", Catalog());
  EXPECT_EQ(bad_type.status().field(), "teams.x.guaranteed.H300");
  auto typo = QuotaConfig::FromYaml("teams: {x: {borow_limit: 1}}", Catalog());
  EXPECT_EQ(typo.status().field(), "teams.x.borow_limit");
  auto low_max = QuotaConfig::FromYaml("teams: {x: {guaranteed: {any: 4}, max_gpus: 2}}", Catalog());
  EXPECT_EQ(low_max.status().field(), "teams.x.max_gpus");
}

TEST(QuotaConfig, RefusesJobsNoLimitCouldEverAllow) {
  QuotaConfig q = Quotas();
  EXPECT_TRUE(CheckQuotaAdmissible(MakeJob().Team("vision").Gpus(6), q, Catalog()).ok());
  Status team = CheckQuotaAdmissible(MakeJob().Team("vision").User("u").Gpus(10), q, Catalog());
  EXPECT_EQ(team.field(), "gpus");
  EXPECT_NE(team.message().find("team vision may never hold more than 9.00 GPUs"), std::string::npos) << team.message();
  JobSpec project = MakeJob().Team("vision").Gpus(4);
  project.project = "detector";
  EXPECT_NE(CheckQuotaAdmissible(project, q, Catalog()).message().find("project detector"), std::string::npos);
  EXPECT_NE(CheckQuotaAdmissible(MakeJob().Team("nlp").Gpus(8), q, Catalog()).message().find("user alice"),
            std::string::npos);
  Status runtime = CheckQuotaAdmissible(MakeJob().Team("nlp").Class("high").Limit(72 * kHourMs), q, Catalog());
  EXPECT_EQ(runtime.field(), "time_limit");
  // Fractions and MIG slices count by their share: 3g.40gb is 3/7 of a GPU.
  EXPECT_NEAR(JobGpuShare(MakeJob().Fraction(0.25).spec().request, Catalog()), 0.25, 1e-12);
  EXPECT_NEAR(JobGpuShare(MakeJob().Mig("3g.40gb").spec().request, Catalog()), 3.0 / 7, 1e-12);
}

TEST(Quota, GuaranteesBorrowingAndLimits) {
  // vision holds 5 A100s: 4 count against its A100 guarantee, 1 against "any" (2).
  QuotaConfig q = Quotas();
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("h", "H100-80GB", 8)};
  snap.running = {Running(MakeJob("v").Team("vision").User("ana").Gpus(5), 0, {0, 1, 2, 3, 4})};
  UsageTracker usage(snap, Catalog(), q);
  const GpuTypeId a100 = TypeId("A100-80GB"), h100 = TypeId("H100-80GB");
  EXPECT_DOUBLE_EQ(usage.Borrowed("vision"), 0);
  EXPECT_TRUE(usage.WithinGuarantee("vision", h100, 1));   // 1 over on A100 + 1 H100 = 2 = any pool
  EXPECT_FALSE(usage.WithinGuarantee("vision", a100, 2));  // 1 + 2 over > 2
  usage.Add(MakeJob("v2").Team("vision").User("bo").Gpus(3).spec(), a100, 3);
  EXPECT_DOUBLE_EQ(usage.Borrowed("vision"), 2);  // 8 A100: 4 over the A100 guarantee, minus 2 any
  // 8 held: 1 more reaches max 9; 2 more pass the borrow limit (6 + 4 = 10) but not the max.
  EXPECT_EQ(usage.QuotaBlock(MakeJob().Team("vision").User("cy").Gpus(1), 1), "");
  EXPECT_NE(usage.QuotaBlock(MakeJob().Team("vision").User("cy").Gpus(2), 2).find("at its maximum: holds 8 of 9"),
            std::string::npos);
  // ana holds 5 of her 6.
  EXPECT_NE(usage.QuotaBlock(MakeJob().Team("nlp").User("ana").Gpus(2), 2).find("user ana"), std::string::npos);
}

TEST(Quota, JobsOverALimitWaitWithoutHoldingTheQueueBack) {
  QuotaConfig q = Quotas();
  Snapshot snap;
  snap.nodes = {MakeNode("a", "A100-80GB", 8)};
  snap.running = {Running(MakeJob("v").Team("vision").User("ana").Gpus(6), 0, {0, 1, 2, 3, 4, 5})};
  // vision holds 6 of its maximum 9: a 4-GPU job must wait, an nlp job behind it need not.
  snap.pending = {Pending(MakeJob("too-much").Team("vision").User("bo").Gpus(4).Class("high"), 0),
                  Pending(MakeJob("other").Team("nlp").User("di").Gpus(2), 1)};
  Plan plan = Schedule(snap, MechanismConfig(), &q);
  const WaitingJob* w = FindWaiting(plan, "too-much");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->code, WaitCode::kQuota);
  EXPECT_NE(plan.reason(*w).find("team vision is at its maximum: holds 6 of 9 GPUs"), std::string::npos)
      << plan.reason(*w);
  EXPECT_NE(FindStart(plan, "other"), nullptr);  // not a backfill: the quota wait blocks nothing
  EXPECT_FALSE(FindStart(plan, "other")->backfilled);
}

// With default_share equal and a default_team that guarantees nothing, each unlisted team
// with work is guaranteed an equal part of what the listed guarantees leave.
TEST(Quota, UnlistedTeamsWithWorkShareWhatListedGuaranteesLeaveEqually) {
  EXPECT_FALSE(QuotaConfig{}.SharesEqually());  // no file at all: not unless asked
  QuotaConfig shared;
  shared.default_share = DefaultShare::kEqual;
  std::vector<Node> nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  nodes[1].state = NodeState::kDraining;  // takes no work: not shared out
  EXPECT_DOUBLE_EQ(EqualShareNow(shared, nodes, {"x", "y"}), 4);
  EXPECT_DOUBLE_EQ(EqualShareNow(shared, nodes, {}), 0);
  // Listed: vision 6 and nlp 2 of 16 GPUs leave 8 for the two unlisted teams with work.
  QuotaConfig listed = Quotas();
  listed.default_share = DefaultShare::kEqual;
  nodes[1].state = NodeState::kUp;
  EXPECT_DOUBLE_EQ(EqualShareNow(listed, nodes, {"vision", "x", "y"}), 4);
  EXPECT_DOUBLE_EQ(listed.GuaranteeOf("x", 4), 4);
  EXPECT_DOUBLE_EQ(listed.GuaranteeOf("nlp", 4), 2);  // a listed team keeps its own

  // The engine's accounting: x holds 5 of its 4; y holds none and may take 4.
  Snapshot snap;
  snap.nodes = nodes;
  snap.equal_share = 4;
  snap.running = {Running(MakeJob("x1").Team("x").Gpus(5), 0, {0, 1, 2, 3, 4})};
  UsageTracker usage(snap, Catalog(), listed);
  EXPECT_DOUBLE_EQ(usage.Guarantee("x"), 4);
  EXPECT_DOUBLE_EQ(usage.Borrowed("x"), 1);
  EXPECT_TRUE(usage.WithinGuarantee("y", TypeId("A100-80GB"), 4));
  EXPECT_FALSE(usage.WithinGuarantee("y", TypeId("A100-80GB"), 5));

  // The file turns it on; default_share none, or a default_team guarantee, leave it off.
  auto on = QuotaConfig::FromYaml("default_share: equal", Catalog());
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_DOUBLE_EQ(EqualShareNow(*on, nodes, {"x"}), 16);
  auto off = QuotaConfig::FromYaml("default_share: none", Catalog());
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_DOUBLE_EQ(EqualShareNow(*off, nodes, {"x"}), 0);
  auto fixed = QuotaConfig::FromYaml("default_share: equal\ndefault_team: {guaranteed: {any: 1}}", Catalog());
  ASSERT_TRUE(fixed.ok());
  EXPECT_FALSE(fixed->SharesEqually());
  EXPECT_DOUBLE_EQ(fixed->GuaranteeOf("x", 0), 1);
  auto bad = QuotaConfig::FromYaml("default_share: half", Catalog());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "default_share");
}

}  // namespace
}  // namespace gantry
