// Run-time predictions in the live server, as in the simulator: each job that succeeds
// teaches the RuntimePredictor its run time (and the store's jobs teach it again after a
// restart), and waiting jobs without a trustworthy estimate get its prediction, so backfill
// plans and the estimated starts users see come from what jobs alike ran, not from a 24 h
// time limit.
#include "state/controller_state.h"

namespace gantry {

void ControllerState::LearnRun(const JobRecord& job) {
  if (job.state != JobState::kSucceeded || job.start_ms < 0 || job.end_ms <= job.start_ms) return;
  predictor_.Observe(*job.spec, job.end_ms - job.start_ms);
  ++predictor_version_;
}

JobSpecPtr ControllerState::WithPrediction(const JobSpecPtr& spec) const {
  DurationMs predicted = std::max<DurationMs>(0, predictor_.Predict(*spec));
  if (predicted == spec->predicted_duration_ms) return spec;
  auto updated = std::make_shared<JobSpec>(*spec);
  updated->predicted_duration_ms = predicted;
  return updated;
}

void ControllerState::RefreshPredictions() {
  if (predicted_version_ == predictor_version_) return;
  predicted_version_ = predictor_version_;
  // The queue keeps its order until its next recalculation; the plans use the new
  // predictions at once.
  for (PendingJob& p : snap_.pending) {
    JobSpecPtr spec = WithPrediction(p.spec);
    if (spec == p.spec) continue;
    p.spec = spec;
    if (JobRecord* job = Find(spec->id)) job->spec = spec;
    dirty_ = true;
  }
  for (uint64_t seq : kept_out_) {
    JobRecord& job = jobs_.at(seq);
    job.spec = WithPrediction(job.spec);
  }
}

}  // namespace gantry
