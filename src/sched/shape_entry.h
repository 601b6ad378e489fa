// What one engine cycle knows about a job shape (jobs with equal shape keys fit and fail
// alike): its compiled demand, the diagnosis and what placing it has shown so far. Only
// engine.cc uses it; apart so the cycle's file stays about the cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/demand.h"
#include "sched/plan.h"

namespace gantry::sched_internal {

// What this cycle knows about one job shape: its compiled demand and what was learned.
struct ShapeEntry {
  Demand demand;
  double share = 0;        // GPUs a job of this shape holds (for quotas)
  bool fails_now = false;  // no room even ignoring reservations (stays true: room only shrinks)
  int reason_id = -1;      // diagnosis, in Plan::reasons
  WaitCode code = WaitCode::kNoCapacity;
  // Outcome when respecting the first k reservations: 0 unknown, 1 fails for capacity,
  // 2 behind a reservation. Valid while generation == the cycle's reservation count.
  size_t generation = SIZE_MAX;
  std::vector<int8_t> respecting;
  const std::string* key = nullptr;  // the shape's key in Cycle::shapes_
  // When explaining a shape that names GPU types: whether they are scarcer than their
  // demand (-1 not yet known), the note saying so, and the diagnosis with it.
  bool names_types = false;  // its jobs name GPU types (gpu_types)
  int8_t scarce = -1;
  std::string scarce_note;
  int scarce_reason_id = -1;
  double waiting_gpus = 0;  // what the pending jobs of this shape ask, once every one is learned
};

}  // namespace gantry::sched_internal
