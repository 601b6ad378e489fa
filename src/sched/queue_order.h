// Queue order: priority classes as strict tiers; then, when configured, least attained
// service tiers (Tiresias); then a weighted score of the priority factors (age, size, fair
// share, short job, guarantee: priority_factors.h), like Slurm's multifactor priority; ties
// go to the earlier submit, then the earlier arrival (where the caller numbers them), then
// the smaller job id.
//
// Worked example (age_weight 1000, age_max 7d, size_weight 500, fairshare_weight 0,
// largest node 8 GPUs): job A (high, waiting 1d, 8 GPUs) scores 1000*1/7 + 500*1 = 642.9;
// job B (high, waiting 3.5d, 1 GPU) scores 500 + 62.5 = 562.5; job C (critical, just
// submitted, 1 GPU) 62.5. Order: C (critical outranks high), then A, then B.
// With fair share, a team's factor F (fair_share.h) adds fairshare_weight * F.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

struct QueueContext {
  const SchedulerConfig& config;
  TimeMs now_ms = 0;
  int largest_node_gpus = 0;
  const std::map<std::string, double>* fair_share = nullptr;  // team -> F; null: no fair share
  // Team -> 1 while it holds less than its guarantee, 2 once that has lasted reclaim_after.
  const std::map<std::string, int>* guarantee_level = nullptr;
};

// Laid out small (40 bytes): a long queue's sort moves these around.
struct QueueEntry {
  size_t pending_index = 0;
  double score = 0;
  TimeMs submit_ms = 0;
  uint64_t arrival = 0;  // PendingJob::arrival
  int class_rank = 0;
  int tier = 0;            // least-attained-service tier (0 when LAS is off)
  bool nominated = false;  // jobs were evicted for it: first in its class
};

double QueueScore(const PendingJob& job, const QueueContext& ctx);
// The job's LAS tier: how many thresholds its attained GPU-hours have passed.
int LasTier(double attained_gpu_ms, const SchedulerConfig& config);

// True when entry `a` (of job id `a_id`) goes before `b`.
// Ids in order: the server's are decimal numbers, so "9" comes before "10"; others by text.
inline bool IdBefore(const std::string& a, const std::string& b) {
  auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (a.size() != b.size() && digits(a) && digits(b)) return a.size() < b.size();
  return a < b;
}
// The order of two entries by everything but their ids: -1 `a` first, 1 `b` first, 0 a tie.
inline int QueueKeyOrder(const QueueEntry& a, const QueueEntry& b) {
  if (a.class_rank != b.class_rank) return a.class_rank > b.class_rank ? -1 : 1;
  if (a.nominated != b.nominated) return a.nominated ? -1 : 1;
  if (a.tier != b.tier) return a.tier < b.tier ? -1 : 1;
  if (a.score != b.score) return a.score > b.score ? -1 : 1;
  if (a.submit_ms != b.submit_ms) return a.submit_ms < b.submit_ms ? -1 : 1;
  if (a.arrival != b.arrival) return a.arrival < b.arrival ? -1 : 1;
  return 0;
}
inline bool QueueKeyBefore(const QueueEntry& a, const std::string& a_id, const QueueEntry& b, const std::string& b_id) {
  int order = QueueKeyOrder(a, b);
  return order != 0 ? order < 0 : IdBefore(a_id, b_id);
}
// The jobs' ids are read only on a tie (each spec lives apart on the heap).
inline bool QueueBefore(const QueueEntry& a, const QueueEntry& b, const std::vector<PendingJob>& pending) {
  int order = QueueKeyOrder(a, b);
  return order != 0 ? order < 0 : IdBefore(pending[a.pending_index].spec->id, pending[b.pending_index].spec->id);
}

// The entry of one pending job.
QueueEntry MakeQueueEntry(const std::vector<PendingJob>& pending, size_t index, const QueueContext& ctx);

// Pending jobs in the order the engine considers them (unsorted when `sorted` is false).
// `visit`, when given, sees each job with its spec in stored order, while the entry is made
// (the spec's memory is then at hand: the engine learns each job's shape there).
std::vector<QueueEntry> OrderQueue(const std::vector<PendingJob>& pending, const QueueContext& ctx, bool sorted = true,
                                   const std::function<void(size_t index)>& visit = nullptr);

}  // namespace gantry
