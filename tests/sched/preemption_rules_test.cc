// Each preemption rule of sched/preemption_rules.h alone: when it opens to a blocked job,
// whom it allows, what it may take from a team, its victim limit and its patience; and the
// service rule through the engine (the others have engine tests in preemption_test.cc and
// starvation_guard_test.cc).
#include "sched/preemption_rules.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched/cluster_state.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

// One blocked job against one snapshot, with the rules' context over it.
class RuleBench {
 public:
  RuleBench(Snapshot snap, const SchedulerConfig& config, const std::string& quotas_yaml = "teams: {}")
      : snap_(std::move(snap)),
        config_(config),
        quotas_(*QuotaConfig::FromYaml(quotas_yaml, Catalog())),
        state_(snap_, Catalog()),
        usage_(snap_, Catalog(), quotas_),
        ctx_(config_, quotas_, usage_, snap_.now_ms) {}

  // The blocked job's view; its class rank and LAS tier from the config.
  Preemptor For(const JobSpec& spec, TimeMs below_since = kNever, bool rescue = false) {
    specs_.push_back(std::make_unique<JobSpec>(spec));
    demands_.push_back(std::make_unique<Demand>(CompileDemand(*specs_.back(), Catalog(), state_.max_gpus_per_type())));
    Preemptor p;
    p.spec = specs_.back().get();
    p.demand = demands_.back().get();
    p.share = spec.request.gpus;
    int c = config_.FindClass(spec.priority_class);
    p.class_rank = c >= 0 ? config_.priority_classes[c].rank : INT32_MIN;
    p.class_preempts = c >= 0 && config_.priority_classes[c].preempts_others;
    p.rescue = rescue;
    p.below_guarantee_since = below_since;
    return p;
  }
  VictimCandidate Victim(size_t running_index) const {
    const RunningJob& r = snap_.running[running_index];
    int c = config_.FindClass(r.spec->priority_class);
    return {&r, c >= 0 ? config_.priority_classes[c].rank : INT32_MIN};
  }
  RuleContext& ctx() { return ctx_; }

 private:
  Snapshot snap_;
  SchedulerConfig config_;
  QuotaConfig quotas_;
  ClusterState state_;
  UsageTracker usage_;
  RuleContext ctx_;
  std::vector<std::unique_ptr<JobSpec>> specs_;
  std::vector<std::unique_ptr<Demand>> demands_;
};

const PreemptionRule& Rule(const std::string& name) {
  const PreemptionRule* rule = FindPreemptionRule(name);
  EXPECT_NE(rule, nullptr) << name;
  return *rule;
}

Snapshot OneNode(std::vector<RunningJob> running, TimeMs now = 2 * kHourMs) {
  Snapshot snap;
  snap.now_ms = now;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  snap.running = std::move(running);
  return snap;
}

TEST(PreemptionRules, TheTableTriesPriorityReclaimServiceThenStarvationAsALastResort) {
  std::vector<std::string> names;
  for (const PreemptionRule& r : PreemptionRules()) {
    names.push_back(r.name);
    EXPECT_EQ(r.last_resort, names.back() == "starvation") << r.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"priority", "reclaim", "service", "starvation"}));
  EXPECT_EQ(FindPreemptionRule("seniority"), nullptr);
}

TEST(PreemptionRules, PriorityLetsAPreemptingClassEvictLowerClassesOnly) {
  SchedulerConfig config = MechanismConfig();
  RuleBench bench(OneNode({Running(MakeJob("low").Class("low").Gpus(4), 0, {0, 1, 2, 3}),
                           Running(MakeJob("peer").Class("high").Gpus(4), 0, {4, 5, 6, 7})}),
                  config);
  const PreemptionRule& rule = Rule("priority");
  Preemptor high = bench.For(MakeJob("urgent").Class("high").Gpus(4));
  EXPECT_TRUE(rule.opens(high, bench.ctx()));
  EXPECT_TRUE(rule.allows(high, bench.Victim(0), bench.ctx()));
  EXPECT_FALSE(rule.allows(high, bench.Victim(1), bench.ctx())) << "the same class never";
  EXPECT_TRUE(rule.may_have_victims(high, bench.Victim(0).class_rank));
  EXPECT_FALSE(rule.may_have_victims(high, high.class_rank)) << "nothing runs below its class";
  EXPECT_EQ(rule.room, nullptr);
  EXPECT_EQ(rule.patient, nullptr);
  // A class that never preempts (Kubernetes' preemptionPolicy: Never), or the rule off.
  Preemptor polite = high;
  polite.class_preempts = false;
  EXPECT_FALSE(rule.opens(polite, bench.ctx()));
  config.preempt_by_priority = false;
  RuleBench off(OneNode({}), config);
  EXPECT_FALSE(rule.opens(off.For(MakeJob("urgent").Class("high")), off.ctx()));
}

// owner is guaranteed 4 GPUs and holds none; borrower, guaranteed 2, holds 3 1-GPU jobs and
// one 2-GPU job (3 above its guarantee); owner has been below its guarantee for 30 min.
TEST(PreemptionRules, ReclaimTakesOnlyWhatATeamBorrowsWithinTheReclaimersGuarantee) {
  std::vector<RunningJob> running;
  for (int g = 0; g < 3; ++g) {
    running.push_back(Running(MakeJob("b" + std::to_string(g)).Team("borrower"), 0, {g}, kHourMs));
  }
  running.push_back(Running(MakeJob("b-two").Team("borrower").Gpus(2), 0, {3, 4}, kHourMs));
  running.push_back(Running(MakeJob("own").Team("owner"), 0, {5}, kHourMs));
  const TimeMs now = 2 * kHourMs;
  RuleBench bench(OneNode(std::move(running), now), MechanismConfig(),
                  "teams: {owner: {guaranteed: {any: 4}}, borrower: {guaranteed: {any: 2}}}");
  const PreemptionRule& rule = Rule("reclaim");
  Preemptor two = bench.For(MakeJob("mine").Team("owner").Gpus(2), now - 30 * kMinuteMs);
  EXPECT_TRUE(rule.opens(two, bench.ctx()));
  EXPECT_TRUE(rule.allows(two, bench.Victim(0), bench.ctx()));
  EXPECT_TRUE(rule.allows(two, bench.Victim(3), bench.ctx())) << "borrower borrows 3 >= 2";
  EXPECT_FALSE(rule.allows(two, bench.Victim(4), bench.ctx())) << "never the reclaimer's own team";
  EXPECT_DOUBLE_EQ(rule.room("borrower", bench.ctx()), 3.0);
  EXPECT_DOUBLE_EQ(rule.room("owner", bench.ctx()), 0.0);
  // 0.5 victims per GPU freed, at least one; a rescue is not limited.
  EXPECT_DOUBLE_EQ(rule.most_victims(two, bench.ctx()), 1.0);
  EXPECT_DOUBLE_EQ(rule.most_victims(bench.For(MakeJob("m").Team("owner").Gpus(3), now - kHourMs), bench.ctx()), 1.5);
  // Patient until reclaim_after + reclaim_patience (50 min), never for a rescue.
  EXPECT_TRUE(rule.patient(two, bench.ctx()));
  EXPECT_FALSE(rule.patient(bench.For(MakeJob("m").Team("owner").Gpus(2), now - 50 * kMinuteMs), bench.ctx()));
  Preemptor rescued = bench.For(MakeJob("m").Team("owner").Gpus(2), kNever, /*rescue=*/true);
  EXPECT_TRUE(rule.opens(rescued, bench.ctx())) << "a rescue reclaims whatever its team's clock says";
  EXPECT_FALSE(rule.patient(rescued, bench.ctx()));
  EXPECT_TRUE(std::isinf(rule.most_victims(rescued, bench.ctx())));
  // Closed: below for only 20 min; a job that would take owner past its guarantee (1 + 4);
  // a team with no guarantee.
  EXPECT_FALSE(rule.opens(bench.For(MakeJob("m").Team("owner").Gpus(2), now - 20 * kMinuteMs), bench.ctx()));
  EXPECT_FALSE(rule.opens(bench.For(MakeJob("m").Team("owner").Gpus(4), now - kHourMs), bench.ctx()));
  EXPECT_FALSE(rule.opens(bench.For(MakeJob("m").Team("guest").Gpus(1), now - kHourMs), bench.ctx()));
}

TEST(PreemptionRules, ReclaimNeverTakesAJobLargerThanItsTeamBorrows) {
  // borrower (guaranteed 2) holds one 3-GPU job: 1 borrowed, and evicting 3 would leave it
  // below its own guarantee.
  const TimeMs now = 2 * kHourMs;
  RuleBench bench(OneNode({Running(MakeJob("big").Team("borrower").Gpus(3), 0, {0, 1, 2}, kHourMs)}, now),
                  MechanismConfig(), "teams: {owner: {guaranteed: {any: 4}}, borrower: {guaranteed: {any: 2}}}");
  const PreemptionRule& rule = Rule("reclaim");
  Preemptor p = bench.For(MakeJob("mine").Team("owner").Gpus(1), now - kHourMs);
  EXPECT_TRUE(rule.opens(p, bench.ctx()));
  EXPECT_FALSE(rule.allows(p, bench.Victim(0), bench.ctx()));
}

TEST(PreemptionRules, ReclaimIsClosedToATeamThatHasUsedGuaranteeMaxUseOfItsShareUnlessItStarves) {
  const TimeMs now = 2 * kHourMs;
  RuleBench bench(OneNode({Running(MakeJob("b").Team("borrower"), 0, {0}, kHourMs)}, now), MechanismConfig(),
                  "teams: {owner: {guaranteed: {any: 4}}, borrower: {guaranteed: {any: 0}}}");
  const PreemptionRule& rule = Rule("reclaim");
  ASSERT_DOUBLE_EQ(bench.ctx().config.guarantee_max_use, 0.75) << "as shipped";
  std::map<std::string, double> factors = {{"owner", 0.5}};  // U/S = 1: it used its share
  bench.ctx().fair_share = &factors;
  Preemptor p = bench.For(MakeJob("mine").Team("owner"), now - kHourMs);
  EXPECT_FALSE(bench.ctx().GuaranteeActs("owner"));
  EXPECT_FALSE(rule.opens(p, bench.ctx()));
  EXPECT_TRUE(rule.opens(bench.For(MakeJob("m").Team("owner"), kNever, /*rescue=*/true), bench.ctx()))
      << "the starvation bound is kept whatever the team used";
  factors["owner"] = std::exp2(-0.5);  // U/S = 0.5
  EXPECT_TRUE(bench.ctx().GuaranteeActs("owner"));
  EXPECT_TRUE(rule.opens(p, bench.ctx()));
  factors.erase("owner");  // no usage on record
  EXPECT_TRUE(rule.opens(p, bench.ctx()));
}

SchedulerConfig ServiceTiers() {
  SchedulerConfig config = MechanismConfig();
  config.preemption_enabled = true;
  config.preempt_by_service = true;
  config.las_thresholds_gpu_hours = {1, 10};
  return config;
}

TEST(PreemptionRules, ServiceLetsALowerTierEvictAJobThatHasRunIntoAHigherOne) {
  const TimeMs now = 2 * kHourMs;
  // "long" has held 2 GPUs for an hour (2 GPU-hours: tier 1); "short" 1 GPU for 30 min.
  RuleBench bench(OneNode({Running(MakeJob("long").Gpus(2), 0, {0, 1}, now - kHourMs),
                           Running(MakeJob("short"), 0, {2}, now - 30 * kMinuteMs)},
                          now),
                  ServiceTiers());
  const PreemptionRule& rule = Rule("service");
  Preemptor fresh = bench.For(MakeJob("new").Gpus(2));
  EXPECT_TRUE(rule.opens(fresh, bench.ctx()));
  EXPECT_TRUE(rule.allows(fresh, bench.Victim(0), bench.ctx()));
  EXPECT_FALSE(rule.allows(fresh, bench.Victim(1), bench.ctx()));
  Preemptor served = fresh;
  served.las_tier = 1;
  EXPECT_FALSE(rule.allows(served, bench.Victim(0), bench.ctx())) << "the same tier never";
  SchedulerConfig no_tiers = ServiceTiers();
  no_tiers.las_thresholds_gpu_hours.clear();
  RuleBench off(OneNode({}), no_tiers);
  EXPECT_FALSE(rule.opens(off.For(MakeJob("new")), off.ctx()));
}

TEST(PreemptionRules, ServiceEvictionsCarryTheRulesNameThroughTheEngine) {
  const TimeMs now = 2 * kHourMs;
  Snapshot snap = OneNode({}, now);
  for (int g = 0; g < 8; ++g) {
    // Each has held its GPU for 90 minutes (1.5 GPU-hours: tier 1) since its checkpoint.
    snap.running.push_back(Running(MakeJob("old" + std::to_string(g)), 0, {g}, now - 90 * kMinuteMs));
  }
  snap.pending = {Pending(MakeJob("new").Gpus(1), now)};
  Plan plan = Schedule(snap, ServiceTiers());
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].reason, "service");
  EXPECT_EQ(plan.preemptions[0].for_job, "new");
  SchedulerConfig off = ServiceTiers();
  off.preempt_by_service = false;
  EXPECT_TRUE(Schedule(snap, off).preemptions.empty());
}

TEST(PreemptionRules, StarvationIsALastResortThatNeverTakesATeamsLastGpus) {
  RuleBench bench(OneNode({Running(MakeJob("a1").Team("a"), 0, {0}), Running(MakeJob("a2").Team("a"), 0, {1}),
                           Running(MakeJob("solo").Team("b").Gpus(2), 0, {2, 3}),
                           Running(MakeJob("mine-running").Team("starved"), 0, {4})}),
                  MechanismConfig());
  const PreemptionRule& rule = Rule("starvation");
  EXPECT_TRUE(rule.last_resort);
  Preemptor rescued = bench.For(MakeJob("rescued").Team("starved").Gpus(1), kNever, /*rescue=*/true);
  EXPECT_TRUE(rule.opens(rescued, bench.ctx()));
  EXPECT_FALSE(rule.opens(bench.For(MakeJob("plain").Team("starved")), bench.ctx())) << "only a rescue";
  EXPECT_TRUE(rule.allows(rescued, bench.Victim(0), bench.ctx())) << "team a keeps a2";
  EXPECT_FALSE(rule.allows(rescued, bench.Victim(2), bench.ctx())) << "team b's only job";
  EXPECT_FALSE(rule.allows(rescued, bench.Victim(3), bench.ctx())) << "never its own team";
  // Together its victims leave each team something.
  EXPECT_LT(rule.room("a", bench.ctx()), 2.0);
  EXPECT_GT(rule.room("a", bench.ctx()), 1.0);
}

}  // namespace
}  // namespace gantry
