// Run-time predictions in the live server, as in the simulator: each job that succeeds
// teaches the RuntimePredictor its run time (and the store's jobs teach it again after a
// restart), and a waiting job without a trustworthy estimate plans with its prediction, so
// backfill plans and the estimated starts users see come from what jobs alike ran, not from
// a 24 h time limit.
#pragma once

#include <cstdint>

#include "sched/runtime_predictor.h"
#include "state/job_record.h"

namespace gantry {

class RunTimePredictions {
 public:
  // A job's run: a success teaches the predictor (anything else is not its run time).
  void Learn(const JobRecord& job);
  // The spec with the prediction it plans with now (the same pointer when unchanged).
  JobSpecPtr Apply(const JobSpecPtr& spec) const;
  // Whether runs were learnt since the waiting jobs last got their predictions; they are
  // taken as given from here.
  bool TakeNews();

 private:
  RuntimePredictor predictor_;
  uint64_t learnt_ = 0;   // runs learnt
  uint64_t applied_ = 0;  // runs learnt when the waiting jobs last got their predictions
};

}  // namespace gantry
