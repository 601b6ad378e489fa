// Preemption rules: whom a blocked job may evict, and how much of each team. Each rule is a
// named entry in a table (as plugins.h's filters are), so a new rule is one entry and its
// test, and the victim carries the name of the rule it went under ("priority", ...).
//
// The engine asks each rule whether it is open to the blocked job at all (`opens`), then
// for each running job the protections let go (preemptible, past min_runtime, ...) whether
// it may go under the rule (`allows`): a job goes under the first rule, in table order,
// that allows it. The victim search then keeps the victims of a rule with a `room` within
// what that rule may take from each team together. Last-resort rules are opened only when
// the others found no victims. The protections come before any rule: a running job goes
// under none if it is not preemptible, its class is not, it ran less than min_runtime, it
// was evicted max_evictions times, or it stops within the grace period anyway.
//
// A new rule is an entry in preemption_rules.cc's kRules, its switch in SchedulerConfig
// (and scheduler_config.cc) when it has one, its name in plan.h's Preemption::reason, and
// its test in tests/sched/preemption_rules_test.cc. The engine remembers, per cycle, a
// search that failed for a job's shape, team, class, LAS tier and rescue: a rule's
// decisions may depend on nothing else of the blocked job (else extend that key in
// engine.cc's TryPreempt).
//
// Worked example (teams a and b each guaranteed 4 GPUs, one full 8-GPU node): b holds 6 GPUs
// in three 2-GPU jobs, a holds 2, and a's 2-GPU job has waited below the guarantee for
// reclaim_after. "reclaim" opens (a stays within its guarantee with 2 more), allows each
// of b's jobs (b borrows 2 GPUs, at least each job's 2) and gives the search room for 2 of
// b's GPUs and 1 victim (0.5 per GPU freed): one of b's jobs goes, the one that loses the
// least work. Were a's job 4 GPUs, two of b's jobs would exceed b's room: no reclaim.
#pragma once

#include <map>
#include <span>
#include <string>
#include <unordered_map>

#include "core/quota_config.h"
#include "core/scheduler_config.h"
#include "sched/demand.h"
#include "sched/plan.h"
#include "sched/usage.h"

namespace gantry {

// The blocked job, as the rules see it.
struct Preemptor {
  const JobSpec* spec = nullptr;
  const Demand* demand = nullptr;
  double share = 0;                       // GPUs it will hold (for quotas)
  int class_rank = 0;                     // INT32_MIN when its class is unknown
  bool class_preempts = false;            // its class may evict lower classes (preempts_others)
  int las_tier = 0;                       // its least-attained-service tier
  bool rescue = false;                    // its team is starving past the bound and this is its rescued job
  TimeMs below_guarantee_since = kNever;  // when its team went below its guarantee, kNever if not
};

// A running job the protections let go, as the rules see it.
struct VictimCandidate {
  const RunningJob* job = nullptr;
  int class_rank = 0;  // INT32_MIN when its class is unknown
};

// What the rules read besides the two jobs, for one preemption attempt: the usage is that of
// the cycle so far, and the teams' borrowed GPUs are looked up once each.
class RuleContext {
 public:
  RuleContext(const SchedulerConfig& config, const QuotaConfig& quotas, const UsageTracker& usage, TimeMs now)
      : config(config), quotas(quotas), usage(usage), now_ms(now) {}
  double Borrowed(const std::string& team);
  // Whether `team`'s guarantee acts for it (fair_share.h GuaranteeActs; a team the
  // factors do not list, or no factors: it does).
  bool GuaranteeActs(const std::string& team) const;

  const SchedulerConfig& config;
  const QuotaConfig& quotas;
  const UsageTracker& usage;
  const TimeMs now_ms;
  const std::map<std::string, double>* fair_share = nullptr;  // the teams' factors F, when read

 private:
  std::unordered_map<std::string, double> borrowed_;
};

struct PreemptionRule {
  const char* name;  // on the victim: why it went
  bool last_resort;  // opened only when the other rules found no victims
  bool (*opens)(const Preemptor& p, RuleContext& ctx);
  bool (*allows)(const Preemptor& p, const VictimCandidate& v, RuleContext& ctx);
  // A cheap test before any running job is looked at: whether a job could go under this rule
  // when the lowest class rank among the running jobs the protections let go is
  // `lowest_victim_rank`; nullptr: it could.
  bool (*may_have_victims)(const Preemptor& p, int lowest_victim_rank);
  // GPUs this rule's victims may take from `team` together; nullptr: no limit.
  double (*room)(const std::string& team, RuleContext& ctx);
  // How many jobs this rule may break up for the blocked job; nullptr: no limit.
  double (*most_victims)(const Preemptor& p, RuleContext& ctx);
  // True while the rule would rather wait up to reclaim_patience for GPUs to come free by
  // themselves (evicting loses work; waiting a little may not); nullptr: never.
  bool (*patient)(const Preemptor& p, RuleContext& ctx);
};

// The rules in the order they are tried: priority, reclaim, service, starvation.
std::span<const PreemptionRule> PreemptionRules();
// The rule of this name, or nullptr.
const PreemptionRule* FindPreemptionRule(const std::string& name);

}  // namespace gantry
