// The scheduling engine: snapshot in, plan out. No I/O, no threads, no clock: the same
// snapshot always gives the same plan. The server and the simulator both call Schedule().
//
// One cycle: order the queue (queue_order.h, with fair share from fair_share.h); walk it.
// A job over its team's, project's or user's limit waits (usage.h). A job that fits now
// (placer.h) starts unless it would delay a reservation. A blocked job may evict running
// jobs (preemption.h) by priority, to reclaim its team's guarantee, or by attained
// service; else the first blocked jobs (up to backfill.reservations) get a reservation at
// their earliest start (reservation.h); with backfill off, everything behind waits. Jobs of the same shape that
// failed once this cycle fail again without a search, since free resources only shrink
// within a cycle.
#pragma once

#include "core/gpu_catalog.h"
#include "core/quota_config.h"
#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

struct ScheduleOptions {
  // false (the simulator): skip the waiting list and its reasons, and stop walking the
  // queue once no GPU is idle and no reservation is left to make; starts are identical.
  bool explain = true;
  // The caller keeps Snapshot::pending in queue order (OrderQueue's order, scores as of
  // its last recalculation), so the engine need not sort it. Such a queue may hold empty
  // slots (spec null: jobs started since the caller last closed the gaps); they are skipped.
  bool pending_in_order = false;
};

class Engine {
 public:
  // `quotas` may be null: no team limits, every team weight 1.
  Engine(const GpuCatalog& catalog, const SchedulerConfig& config, const QuotaConfig* quotas = nullptr);

  Plan Schedule(const Snapshot& snapshot, ScheduleOptions options = {}) const;

  const GpuCatalog& catalog() const { return catalog_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  const GpuCatalog& catalog_;
  const SchedulerConfig& config_;
  const QuotaConfig* quotas_;
};

// Refuses at submission a job no node of `nodes` could ever hold, naming the field: more
// nodes than the cluster has, more GPUs per node than any allowed node, no node of an
// allowed type. (ValidateJobSpec covers what needs no cluster.)
Status CheckAdmissible(const JobSpec& spec, const std::vector<Node>& nodes, const GpuCatalog& catalog);

}  // namespace gantry
