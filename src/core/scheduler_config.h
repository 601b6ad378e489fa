// Scheduler settings from scheduler_config.yaml: priority classes, queue-order weights,
// backfill and placement. Defaults here equal the shipped config/scheduler_config.yaml.
#pragma once

#include <string>
#include <vector>

#include "core/duration.h"
#include "core/sharing_config.h"
#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct PriorityClass {
  std::string name;
  int rank = 0;                 // higher runs first; classes are strict tiers
  bool preempts_others = true;  // false: like Kubernetes preemptionPolicy: Never
  bool preemptible = true;      // critical work is never evicted
};

enum class PlacementStrategy { kPack, kSpread };

struct SchedulerConfig {
  std::vector<PriorityClass> priority_classes;  // sorted by rank, highest first
  std::string default_priority_class = "medium";

  // Queue order within a class: score = age_weight * min(1, age / age_max)
  //                                    + size_weight * min(1, gpus / largest node's GPUs)
  bool class_tiers = true;  // false: ignore priority classes (pure FIFO by score and age)
  double age_weight = 1000;
  DurationMs age_max_ms = 7 * 24 * kHourMs;
  double size_weight = 0;
  // How often a long-lived queue (the simulator's, the server's) recomputes time-dependent
  // scores and re-sorts, like Slurm's PriorityCalcPeriod.
  DurationMs recalc_period_ms = 5 * kMinuteMs;

  bool backfill_enabled = true;
  int backfill_reservations = 1;  // blocked jobs that get a reservation (1 = EASY backfill)
  int backfill_depth = 1000;      // pending jobs examined per cycle; 0 = all

  PlacementStrategy strategy = PlacementStrategy::kPack;
  int candidates_per_type = 8;  // feasible nodes scored per GPU type
  int weight_pack = 10;         // keep whole nodes free for big jobs (or spread when kSpread)
  int weight_type_cost = 5;     // cheapest allowed type first unless the job has an order
  int weight_nvlink = 20;       // a multi-GPU job's GPUs on one NVLink group
  int weight_labels = 1;        // multiplies the job's preferred-label weights

  // Fair share: a team's factor F = 2^(-U/S) (U its share of decayed usage, S its share
  // of the weights) adds fairshare_weight * F to its jobs' scores.
  double fairshare_weight = 2000;
  // Jobs of a team holding less than its guarantee go first, as Kueue admits work within
  // nominal quota before borrowing work: + guarantee_weight (twice that once the team has
  // been below it for reclaim_after), while its guarantee acts (guarantee_max_use).
  double guarantee_weight = 10000;
  // Short jobs first: + short_job_weight * ref / (ref + estimated GPU-hours), from the job's
  // estimate (or time limit). 0 turns it off.
  double short_job_weight = 4000;
  double short_job_ref_gpu_hours = 1;
  DurationMs fairshare_half_life_ms = 7 * 24 * kHourMs;
  bool fairshare_price_weighted = true;  // usage in USD of GPU time, not GPU-hours
  // A team's guarantee (the queue's guarantee term, and its own right to reclaim) acts
  // while its recent use U/S (its part of the decayed usage over its part of the weights;
  // F = 2^(-U/S)) is under this. A team that has used this much of its share lately
  // competes for more GPUs by fair share, so one team's burst may borrow from teams that
  // used theirs; what it holds within its guarantee is still not reclaimed from it. 0: a
  // guarantee always acts.
  double guarantee_max_use = 0.75;
  // Whether the engine reads the teams' fair-share factors (their weight in the queue
  // order, or guarantee_max_use for the guarantee term and reclaim).
  bool ReadsFairShare() const { return fairshare_weight != 0 || guarantee_max_use > 0; }
  // Least attained service (Tiresias-style): a job's GPU-hours so far put it in a tier;
  // lower tiers go first (after priority class). Empty: off.
  std::vector<double> las_thresholds_gpu_hours;

  // Preemption.
  bool preemption_enabled = true;
  bool preempt_by_priority = true;               // a higher class evicts lower, preemptible classes
  bool preempt_to_reclaim = true;                // a team under its guarantee takes back borrowed GPUs
  bool preempt_by_service = false;               // a lower LAS tier evicts a higher one
  DurationMs min_runtime_ms = 10 * kMinuteMs;    // a job runs this long before it can be evicted
  int max_evictions = 3;                         // a job evicted this often is left alone
  DurationMs grace_period_ms = 120 * kSecondMs;  // to checkpoint before being stopped
  // A team reclaims its guarantee only after holding less than it, with jobs waiting, for
  // this long: completions usually free GPUs sooner, and each eviction costs work. Keep it
  // below the starvation bound you promise (1 hour by default).
  DurationMs reclaim_after_ms = 30 * kMinuteMs;
  // ...and, until it has been below for reclaim_after + reclaim_patience, not when the job
  // would start by itself within reclaim_patience anyway. 20 min: with reclaim_after and the
  // grace period, a team is back at its guarantee within the hour (30 + 20 + 2 min) either
  // way, and a job that will start soon costs nobody their work.
  DurationMs reclaim_patience_ms = 20 * kMinuteMs;
  // A reclaim evicts at most this many jobs per GPU it frees (at least one job): it does not
  // break up many small jobs to make room for one large job. That job keeps its place at
  // the head of the queue, and its reservation drains a node to it instead. 0: no limit.
  double reclaim_victims_per_gpu = 0.5;
  int max_preemptors_per_cycle = 16;  // blocked jobs that may evict, per cycle
  // The starvation guard: a team whose jobs have waited with no GPU held this long has its
  // oldest waiting job considered first (so it gets a reservation that backfill and
  // short-job ordering cannot push back), and that job may evict GPUs other teams hold
  // above their guarantees, or lower classes, whatever its size against its team's
  // guarantee. 45 min by default: with the grace period and the start, the 1 h promise
  // holds. 0: off.
  DurationMs starvation_bound_ms = 45 * kMinuteMs;

  SharingConfig sharing;  // the mode of plain fractions, time-slice packing, the sim's slow-down

  DurationMs default_time_limit_ms = 24 * kHourMs;
  DurationMs max_time_limit_ms = 14 * 24 * kHourMs;

  // Submission limits (as Slurm's MaxArraySize, MaxJobCount and a QOS's MaxSubmitJobs), so
  // one request cannot fill the controller's memory and store; 0: no limit.
  int max_jobs_per_request = 10000;  // jobs and array tasks one submit or batch makes
  int max_waiting_per_user = 10000;  // a user's jobs pending or held at once
  int max_waiting_per_team = 50000;  // a team's

  // Index of a class by name, or -1.
  int FindClass(const std::string& name) const;
  std::string ClassNames() const;

  static Expected<SchedulerConfig> FromYaml(const std::string& yaml_text);
  static Expected<SchedulerConfig> LoadFile(const std::string& path);
  static const SchedulerConfig& Builtin();  // compiled in from config/scheduler_config.yaml
};

}  // namespace gantry
