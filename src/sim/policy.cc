// Policy name -> engine configuration.
#include "sim/policy.h"

namespace gantry {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = {"fifo", "priority", "backfill", "fairshare", "las", "gantry"};
  return names;
}

Expected<SchedulerConfig> PolicyConfig(const std::string& name, const SchedulerConfig& base) {
  SchedulerConfig c = base;
  if (name == "gantry") return c;
  // The baselines: no fair share, no LAS, no preemption unless they say so.
  c.fairshare_weight = 0;
  c.short_job_weight = 0;
  c.guarantee_weight = 0;
  c.las_thresholds_gpu_hours.clear();
  c.preemption_enabled = false;
  c.starvation_bound_ms = 0;
  c.class_tiers = true;
  c.backfill_enabled = true;
  c.backfill_reservations = 1;
  if (name == "fifo") {
    c.class_tiers = false;
    c.size_weight = 0;
    c.backfill_enabled = false;
  } else if (name == "priority") {
    c.backfill_enabled = false;
  } else if (name == "fairshare") {
    c.fairshare_weight = base.fairshare_weight != 0 ? base.fairshare_weight : 2000;
  } else if (name == "las") {
    c.las_thresholds_gpu_hours = base.las_thresholds_gpu_hours;
    if (c.las_thresholds_gpu_hours.empty()) c.las_thresholds_gpu_hours = {1, 16};
    c.preemption_enabled = true;
    c.preempt_by_priority = false;
    c.preempt_to_reclaim = false;
    c.preempt_by_service = true;
  } else if (name != "backfill") {
    std::string known;
    for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return Status::Invalid("policy", "unknown policy '" + name + "' (known: " + known + ")");
  }
  return c;
}

}  // namespace gantry
