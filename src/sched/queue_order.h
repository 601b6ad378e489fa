// Queue order: priority classes as strict tiers, then a weighted score (age, size), like
// Slurm's multifactor priority; ties go to the earlier submit, then the smaller job id.
//
// Worked example (age_weight 1000, age_max 7d, size_weight 500, largest node 8 GPUs):
// job A (high, waiting 1d, 8 GPUs) scores 1000*1/7 + 500*1 = 642.9; job B (high, waiting
// 3.5d, 1 GPU) scores 500 + 62.5 = 562.5; job C (critical, just submitted, 1 GPU) 62.5.
// Order: C (critical outranks high), then A, then B.
#pragma once

#include <cstddef>
#include <vector>

#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

struct QueueEntry {
  size_t pending_index = 0;
  int class_rank = 0;
  double score = 0;
  TimeMs submit_ms = 0;
};

double QueueScore(const PendingJob& job, const SchedulerConfig& config, TimeMs now_ms, int largest_node_gpus);

// True when `a` goes before `b` in `pending`: class rank, score, submit time, job id.
inline bool QueueBefore(const QueueEntry& a, const QueueEntry& b, const std::vector<PendingJob>& pending) {
  if (a.class_rank != b.class_rank) return a.class_rank > b.class_rank;
  if (a.score != b.score) return a.score > b.score;
  if (a.submit_ms != b.submit_ms) return a.submit_ms < b.submit_ms;
  return pending[a.pending_index].spec->id < pending[b.pending_index].spec->id;
}

// The entry of one pending job (class rank, score, submit time).
QueueEntry MakeQueueEntry(const std::vector<PendingJob>& pending, size_t index, const SchedulerConfig& config,
                          TimeMs now_ms, int largest_node_gpus);

// Pending jobs in the order the engine considers them (unsorted when `sorted` is false).
std::vector<QueueEntry> OrderQueue(const std::vector<PendingJob>& pending, const SchedulerConfig& config, TimeMs now_ms,
                                   int largest_node_gpus, bool sorted = true);

}  // namespace gantry
