// Who holds what, per team, GPU type, project and user, during one cycle; and the quota
// rules on top: guarantees (per type plus an "any" pool), borrowing, hard maximums,
// project and user limits.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/quota_config.h"
#include "sched/plan.h"

namespace gantry {

class UsageTracker {
 public:
  UsageTracker(const Snapshot& snap, const GpuCatalog& catalog, const QuotaConfig& quotas);

  // Why `spec` (holding `share` GPUs) may not start under the quotas now; empty if it may.
  std::string QuotaBlock(const JobSpec& spec, double share) const;
  // Records a start (or, with a negative share, an end) on GPU type `type`.
  void Add(const JobSpec& spec, GpuTypeId type, double share);

  // Whether the team stays within its guarantee after taking `share` more on `type`.
  bool WithinGuarantee(const std::string& team, GpuTypeId type, double share) const;
  // GPUs the team holds above its guarantee (0 when at or below it).
  double Borrowed(const std::string& team) const;
  double TeamTotal(const std::string& team) const;
  // Per GPU type: what the snapshot's running jobs hold (the cycle's starts not counted).
  const std::vector<double>& RunningByType() const { return running_by_type_; }
  // The team's guarantee this cycle: its quota's, or for an unlisted team the default
  // team's plus the snapshot's equal share.
  double Guarantee(const std::string& team) const { return quotas_.GuaranteeOf(team, equal_share_); }
  // Per team with a guarantee: 0 at or above it, 1 below it, 2 below it since at least
  // `reclaim_after` (from `since`, kept by the caller) ago.
  std::map<std::string, int> GuaranteeLevels(const std::map<std::string, TimeMs>& since, TimeMs now,
                                             DurationMs reclaim_after) const;

 private:
  struct TeamUse {
    double total = 0;
    std::vector<double> by_type;
  };
  const TeamUse* Find(const std::string& team) const;
  double Over(const TeamQuota& q, const TeamUse* use, GpuTypeId type, double extra) const;
  // The team's type-agnostic pool: its quota's, plus the equal share when unlisted.
  double AnyPool(const std::string& team, const TeamQuota& q) const {
    return q.guaranteed_any + (quotas_.Lists(team) ? 0 : equal_share_);
  }

  const GpuCatalog& catalog_;
  const QuotaConfig& quotas_;
  std::unordered_map<std::string, TeamUse> teams_;
  std::unordered_map<std::string, double> projects_;  // "team/project"
  std::unordered_map<std::string, double> users_;
  std::vector<double> running_by_type_;  // RunningByType
  bool has_limits_ = false;              // any team, project or user limit configured at all
  double equal_share_ = 0;               // Snapshot::equal_share
};

// The guarantee term of the queue order as it stands: per team below its guarantee with
// jobs waiting (`since`: when it went below), 1, or 2 once that has lasted reclaim_after.
// A queue keyed with other tiers is re-keyed at once, not at the next recalc_period: a
// stale term hands freed GPUs to teams above their guarantees, which reclaim then evicts.
std::map<std::string, int> GuaranteeTiers(const std::map<std::string, TimeMs>& since, TimeMs now,
                                          DurationMs reclaim_after);

// The share of one GPU a job holds in `mode`: 1 for whole GPUs, else its fraction or MIG share.
inline double GpuShareOf(const GpuShare& g, SharingMode mode) {
  return mode == SharingMode::kExclusive ? 1.0 : g.milli / 1000.0;
}
// GPU share of a placement (for quotas and usage): whole GPUs, fractions, MIG shares.
double PlacementShare(const Placement& p, SharingMode mode);

}  // namespace gantry
