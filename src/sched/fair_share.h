// Fair share: each team's usage decays with a half-life, and its factor
// F = 2^(-U/S) (U: its share of all decayed usage, S: its share of the weights) enters
// the queue score, as in Slurm's classic fair-share formula.
//
// Worked example (half-life 7 days, weights vision 2, nlp 1, so S = 2/3 and 1/3): vision
// used 100 and nlp 300 (USD of GPU time, decayed). U = 0.25 and 0.75.
// F(vision) = 2^(-0.25/0.667) = 0.771; F(nlp) = 2^(-0.75/0.333) = 0.210. With
// fairshare_weight 2000, vision's jobs gain 1542 points and nlp's 420.
#pragma once

#include <map>
#include <string>

#include "core/quota_config.h"
#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

// Decayed usage per team. The caller (server, simulator) advances it through time with
// the rate at which each team was using GPUs; it is a value, with no clock of its own.
class FairShareLedger {
 public:
  explicit FairShareLedger(DurationMs half_life_ms) : half_life_ms_(half_life_ms) {}

  // Decays all usage from the last advance to `now` and adds what each team used at
  // `rates` (usage units per millisecond, held constant over the interval), exactly:
  // u(t + dt) = u(t) * 2^(-dt/h) + r * h / ln 2 * (1 - 2^(-dt/h)).
  void Advance(TimeMs now, const std::map<std::string, double>& rates);
  const std::map<std::string, double>& usage() const { return usage_; }
  TimeMs last_advanced() const { return last_; }  // -1: never

 private:
  DurationMs half_life_ms_;
  TimeMs last_ = -1;
  std::map<std::string, double> usage_;
};

// Usage units per millisecond of a running job: its GPU share, times its GPU type's
// on-demand price per hour when `price_weighted`.
double UsageRate(const RunningJob& job, const Snapshot& snap, const GpuCatalog& catalog, bool price_weighted);

// F = 2^(-U/S) per team, for the teams in `usage` and in the quota config.
std::map<std::string, double> FairShareFactors(const std::map<std::string, double>& usage, const QuotaConfig& quotas);

// Whether a team's guarantee acts for it (the queue's guarantee term, reclaim) given its
// factor F: always with guarantee_max_use 0, else while its recent use U/S = -log2(F) is
// under guarantee_max_use.
bool GuaranteeActs(double fair_factor, const SchedulerConfig& config);

}  // namespace gantry
