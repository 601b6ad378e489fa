// The scheduling engine: snapshot in, plan out. No I/O, no threads, no clock: the same
// snapshot always gives the same plan. The server and the simulator both call Schedule().
//
// One cycle: order the queue (queue_order.h); walk it, placing each job that fits now
// (placer.h) without delaying any reservation; the first blocked jobs (up to
// backfill.reservations) get a reservation at their earliest start (reservation.h); with
// backfill off, everything behind the first blocked job waits. Jobs of the same shape that
// failed once this cycle fail again without a search, since free resources only shrink
// within a cycle.
#pragma once

#include "core/gpu_catalog.h"
#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

struct ScheduleOptions {
  // false (the simulator): skip the waiting list and its reasons, and stop walking the
  // queue once no GPU is idle and no reservation is left to make; starts are identical.
  bool explain = true;
  // The caller keeps Snapshot::pending in queue order (OrderQueue's order, scores as of
  // its last recalculation), so the engine need not sort it.
  bool pending_in_order = false;
};

class Engine {
 public:
  Engine(const GpuCatalog& catalog, const SchedulerConfig& config) : catalog_(catalog), config_(config) {}

  Plan Schedule(const Snapshot& snapshot, ScheduleOptions options = {}) const;

  const GpuCatalog& catalog() const { return catalog_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  const GpuCatalog& catalog_;
  const SchedulerConfig& config_;
};

// Refuses at submission a job no node of `nodes` could ever hold, naming the field: more
// nodes than the cluster has, more GPUs per node than any allowed node, no node of an
// allowed type. (ValidateJobSpec covers what needs no cluster.)
Status CheckAdmissible(const JobSpec& spec, const std::vector<Node>& nodes, const GpuCatalog& catalog);

}  // namespace gantry
