// The preemption rules table: priority, reclaim, service, starvation.
#include "sched/preemption_rules.h"

#include <algorithm>
#include <array>
#include <limits>

#include "sched/fair_share.h"
#include "sched/queue_order.h"

namespace gantry {

double RuleContext::Borrowed(const std::string& team) {
  auto [it, added] = borrowed_.emplace(team, 0.0);
  if (added) it->second = usage.Borrowed(team);
  return it->second;
}

bool RuleContext::GuaranteeActs(const std::string& team) const {
  if (!fair_share) return true;
  auto it = fair_share->find(team);
  return it == fair_share->end() || gantry::GuaranteeActs(it->second, config);
}

namespace {

double VictimShare(const VictimCandidate& v) { return PlacementShare(v.job->placement, v.job->spec->request.sharing); }

// priority: a job of a higher class (one that preempts others) evicts lower, preemptible
// classes.
bool PriorityOpens(const Preemptor& p, RuleContext& ctx) { return ctx.config.preempt_by_priority && p.class_preempts; }
bool PriorityAllows(const Preemptor& p, const VictimCandidate& v, RuleContext&) { return v.class_rank < p.class_rank; }
bool PriorityMayHaveVictims(const Preemptor& p, int lowest_victim_rank) { return lowest_victim_rank < p.class_rank; }

// reclaim: a team that has held less than its guarantee for reclaim_after takes back GPUs
// other teams hold above theirs, so long as it stays within its own guarantee and its
// guarantee acts (it has not used guarantee_max_use of its share lately); a starving
// team's rescued job always may.
bool ReclaimOpens(const Preemptor& p, RuleContext& ctx) {
  if (p.rescue) return true;
  const SchedulerConfig& c = ctx.config;
  if (!c.preempt_to_reclaim || p.below_guarantee_since == kNever ||
      ctx.now_ms - p.below_guarantee_since < c.reclaim_after_ms || !(ctx.usage.Guarantee(p.spec->team) > 0) ||
      !ctx.GuaranteeActs(p.spec->team)) {
    return false;
  }
  for (GpuTypeId t : p.demand->type_order) {
    if (ctx.usage.WithinGuarantee(p.spec->team, t, p.share)) return true;
  }
  return false;
}
// The victim's team stays at or above its own guarantee.
bool ReclaimAllows(const Preemptor& p, const VictimCandidate& v, RuleContext& ctx) {
  const std::string& team = v.job->spec->team;
  return team != p.spec->team && ctx.Borrowed(team) >= VictimShare(v) - 1e-9;
}
// Only what the team holds above its guarantee.
double ReclaimRoom(const std::string& team, RuleContext& ctx) { return ctx.Borrowed(team); }
// No more than reclaim_victims_per_gpu jobs per GPU freed (at least one); a rescue is not
// limited.
double ReclaimMostVictims(const Preemptor& p, RuleContext& ctx) {
  const double per_gpu = ctx.config.reclaim_victims_per_gpu;
  if (p.rescue || per_gpu <= 0) return std::numeric_limits<double>::infinity();
  return std::max(1.0, per_gpu * p.demand->total_gpus());
}
// Until the team has been below for reclaim_after + reclaim_patience, a job that would start
// by itself within reclaim_patience waits instead.
bool ReclaimPatient(const Preemptor& p, RuleContext& ctx) {
  return !p.rescue && p.below_guarantee_since != kNever &&
         ctx.now_ms - p.below_guarantee_since < ctx.config.reclaim_after_ms + ctx.config.reclaim_patience_ms;
}

// service: with least-attained-service tiers, a job of a lower tier evicts one that has
// (counting its run so far) reached a higher tier.
bool ServiceOpens(const Preemptor&, RuleContext& ctx) {
  return ctx.config.preempt_by_service && !ctx.config.las_thresholds_gpu_hours.empty();
}
bool ServiceAllows(const Preemptor& p, const VictimCandidate& v, RuleContext& ctx) {
  const RunningJob& r = *v.job;
  double attained = r.attained_gpu_ms + static_cast<double>(ctx.now_ms - r.start_ms) * VictimShare(v);
  return LasTier(attained, ctx.config) > p.las_tier;
}

// starvation (last resort): when nothing borrowed frees a starving team's rescued job's
// shape, any other team's evictable job may go, so long as its team keeps GPUs of its own:
// a starving team is never made.
bool StarvationOpens(const Preemptor& p, RuleContext&) { return p.rescue; }
bool StarvationAllows(const Preemptor& p, const VictimCandidate& v, RuleContext& ctx) {
  const std::string& team = v.job->spec->team;
  return team != p.spec->team && ctx.usage.TeamTotal(team) > VictimShare(v) + 1e-9;
}
double StarvationRoom(const std::string& team, RuleContext& ctx) { return ctx.usage.TeamTotal(team) - 2e-9; }

constexpr std::array<PreemptionRule, 4> kRules = {{
    {"priority", false, PriorityOpens, PriorityAllows, PriorityMayHaveVictims, nullptr, nullptr, nullptr},
    {"reclaim", false, ReclaimOpens, ReclaimAllows, nullptr, ReclaimRoom, ReclaimMostVictims, ReclaimPatient},
    {"service", false, ServiceOpens, ServiceAllows, nullptr, nullptr, nullptr, nullptr},
    {"starvation", true, StarvationOpens, StarvationAllows, nullptr, StarvationRoom, nullptr, nullptr},
}};

}  // namespace

std::span<const PreemptionRule> PreemptionRules() { return kRules; }

const PreemptionRule* FindPreemptionRule(const std::string& name) {
  for (const PreemptionRule& r : kRules) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

}  // namespace gantry
