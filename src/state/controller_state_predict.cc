// The waiting jobs' predictions (state/run_time_predictions.h) kept current: after new runs
// were learnt, each queued and kept-out job plans with the new prediction.
#include "state/controller_state.h"

namespace gantry {

void ControllerState::RefreshPredictions() {
  if (!predictions_.TakeNews()) return;
  // The queue keeps its order until its next recalculation; the plans use the new
  // predictions at once.
  for (PendingJob& p : snap_.pending) {
    JobSpecPtr spec = predictions_.Apply(p.spec);
    if (spec == p.spec) continue;
    p.spec = spec;
    if (JobRecord* job = Find(spec->id)) job->spec = spec;
    dirty_ = true;
  }
  for (uint64_t seq : kept_out_) {
    JobRecord& job = jobs_.at(seq);
    job.spec = predictions_.Apply(job.spec);
  }
}

}  // namespace gantry
