// Policy name -> engine configuration.
#include "sim/policy.h"

namespace gantry {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = {"fifo", "priority", "backfill", "gantry"};
  return names;
}

Expected<SchedulerConfig> PolicyConfig(const std::string& name, const SchedulerConfig& base) {
  SchedulerConfig c = base;
  if (name == "fifo") {
    c.class_tiers = false;
    c.size_weight = 0;
    c.backfill_enabled = false;
  } else if (name == "priority") {
    c.class_tiers = true;
    c.backfill_enabled = false;
  } else if (name == "backfill") {
    c.class_tiers = true;
    c.backfill_enabled = true;
    c.backfill_reservations = 1;
  } else if (name != "gantry") {
    std::string known;
    for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return Status::Invalid("policy", "unknown policy '" + name + "' (known: " + known + ")");
  }
  return c;
}

}  // namespace gantry
