// What succeeded runs teach, and the predictions waiting jobs plan with.
#include "state/run_time_predictions.h"

#include <algorithm>

namespace gantry {

void RunTimePredictions::Learn(const JobRecord& job) {
  if (job.state != JobState::kSucceeded || job.start_ms < 0 || job.end_ms <= job.start_ms) return;
  predictor_.Observe(*job.spec, job.end_ms - job.start_ms);
  ++learnt_;
}

JobSpecPtr RunTimePredictions::Apply(const JobSpecPtr& spec) const {
  DurationMs predicted = std::max<DurationMs>(0, predictor_.Predict(*spec));
  if (predicted == spec->predicted_duration_ms) return spec;
  auto updated = std::make_shared<JobSpec>(*spec);
  updated->predicted_duration_ms = predicted;
  return updated;
}

bool RunTimePredictions::TakeNews() {
  if (applied_ == learnt_) return false;
  applied_ = learnt_;
  return true;
}

}  // namespace gantry
