// Scheduler settings from scheduler_config.yaml: priority classes, queue-order weights,
// backfill and placement. Defaults here equal the shipped config/scheduler_config.yaml.
#pragma once

#include <string>
#include <vector>

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

  DurationMs default_time_limit_ms = 24 * kHourMs;
  DurationMs max_time_limit_ms = 14 * 24 * kHourMs;

  // Index of a class by name, or -1.
  int FindClass(const std::string& name) const;
  std::string ClassNames() const;

  static Expected<SchedulerConfig> FromYaml(const std::string& yaml_text);
  static Expected<SchedulerConfig> LoadFile(const std::string& path);
  static const SchedulerConfig& Builtin();  // compiled in from config/scheduler_config.yaml
};

// "90s", "15m", "2h", "1d", "1h30m" or a bare number of seconds.
Expected<DurationMs> ParseDuration(const std::string& text);

}  // namespace gantry
