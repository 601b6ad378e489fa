// The pending queue kept in queue order across cycles, one copy for the live server and
// the simulator: a cycle over a long queue costs what changed, not a sort of everything.
// Jobs pushed onto Snapshot::pending past the ordered part (new, requeued, nominated) wait
// in an unordered tail; Order keys them as of the last re-key and merges them in. Every
// recalc_period (as Slurm's PriorityCalcPeriod), when a team's guarantee tier moves, or
// after Invalidate, every key is computed afresh and the queue re-sorted.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/quota_config.h"
#include "sched/queue_order.h"

namespace gantry {

// What the queue's keys are computed from besides the snapshot.
struct QueuePolicy {
  const SchedulerConfig& config;
  const GpuCatalog& catalog;
  const QuotaConfig& quotas;
  int largest_node_gpus = 0;  // the size term's scale
};

class OrderedQueue {
 public:
  // Puts snap.pending in queue order for a cycle at snap.now_ms, reading its fair-share
  // usage and guarantee clocks (below_guarantee_since) when it re-keys.
  void Order(Snapshot& snap, const QueuePolicy& policy);
  // Puts the jobs added since the last Order in their places without re-keying anything
  // (the keys they get are those the next Order would give them unless it re-keys): what
  // a view of the queue may do without changing what the next cycle decides.
  void MergeNew(std::vector<PendingJob>& pending, const QueuePolicy& policy);
  // Weights or quotas changed: the next Order computes every key afresh.
  void Invalidate() { last_rekey_ms_ = -1; }
  // The job that evictions were made for goes first in its class: it moves to the tail
  // (nominated) and takes its new place at the next Order.
  void Nominate(std::vector<PendingJob>& pending, const std::string& job_id);
  // Takes jobs out (cancelled, held, deleted), keeping the others' order and keys.
  void Remove(std::vector<PendingJob>& pending, const std::set<std::string>& job_ids);
  // Takes out the jobs a plan made from this order started.
  void TakeStarted(std::vector<PendingJob>& pending, const Plan& plan);
  TimeMs last_rekey_ms() const { return last_rekey_ms_; }

 private:
  bool RekeyDue(const Snapshot& snap, const QueuePolicy& policy) const;
  void Rekey(Snapshot& snap, const QueuePolicy& policy);
  void MergeTail(std::vector<PendingJob>& pending, const QueuePolicy& policy);
  QueueContext Context(const QueuePolicy& policy, TimeMs now) const;

  std::vector<QueueEntry> keys_;  // of pending[0, keys_.size()), the ordered part
  TimeMs last_rekey_ms_ = -1;
  std::map<std::string, double> fair_share_;     // as of the last re-key
  std::map<std::string, int> guarantee_levels_;  // as of the last re-key
  std::map<std::string, int> keyed_tiers_;       // GuaranteeTiers as of the last re-key
};

}  // namespace gantry
