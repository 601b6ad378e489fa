// Run times predicted from history, for jobs that give no estimate or whose user's
// estimates are known to be poor: the engine plans backfill and short-job ordering with
// what jobs like this one actually ran, not with a 24 h time limit. Jobs are alike when
// they share the user and the name (or, without a name, the command) and the GPU count;
// with too few of those, the user's jobs of that GPU count. The prediction is a recent
// percentile of their run times (the 3Sigma and Tiresias observation: a user's repeated
// jobs run alike). Pure: the simulator and the controller feed it finished runs.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "core/job.h"

namespace gantry {

struct PredictorOptions {
  size_t window = 20;        // the newest runs kept per key
  size_t min_samples = 3;    // fewer: no prediction from that key
  double percentile = 0.75;  // of the window's run times: above the median, since a low
                             // plan delays the reservations behind it more than a high one
  // A user whose recent estimates were off by more than this factor (median of
  // max(actual/estimate, estimate/actual)) gets predictions instead of their estimates.
  double poor_estimate_factor = 2.0;
};

class RuntimePredictor {
 public:
  explicit RuntimePredictor(PredictorOptions options = {}) : options_(options) {}

  // A run that ended by itself (succeeded or failed; not cancelled, preempted or lost)
  // after `ran_ms`.
  void Observe(const JobSpec& spec, DurationMs ran_ms);
  // The run time to plan `spec` with: -1 to keep the user's estimate (given and
  // trustworthy) or the time limit (nothing alike has run); else the prediction, at most
  // the time limit.
  DurationMs Predict(const JobSpec& spec) const;
  // Whether the user's estimates are known to be poor.
  bool EstimatesPoor(const std::string& user) const;

 private:
  static std::string KeyOf(const JobSpec& spec, bool by_name);
  DurationMs Percentile(const std::deque<DurationMs>& runs) const;

  PredictorOptions options_;
  std::map<std::string, std::deque<DurationMs>> runs_;  // key -> newest runs, oldest first
  std::map<std::string, std::deque<double>> misses_;    // user -> estimate miss factors
};

}  // namespace gantry
