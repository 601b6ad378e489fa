// GPU health rules (config/health.yaml) and the verdicts they give on a reading or an XID:
// which XIDs mean "drain the GPU" and which are the application's fault, temperature,
// uncorrectable ECC, pending row remaps, a lost GPU.
#pragma once

#include <set>
#include <string>

#include "agent/gpu_provider.h"

namespace gantry {

struct HealthRules {
  std::set<int> drain_xids;
  std::set<int> app_xids;
  bool drain_unknown_xid = true;
  double max_temperature_c = 92;
  bool drain_on_uncorrectable_ecc = true;
  bool drain_on_remap_pending = true;
  std::string check_command;
  DurationMs check_interval_ms = 60000;
  DurationMs telemetry_interval_ms = 5000;

  static Expected<HealthRules> FromYaml(const std::string& text);
  static const HealthRules& Builtin();  // config/health.yaml as shipped
  // DIR/health.yaml when it exists, else the built-in rules.
  static Expected<HealthRules> LoadDir(const std::string& dir);
};

// Why the reading makes the GPU unhealthy; empty when it does not.
std::string UnhealthyReason(const GpuSample& s, const HealthRules& rules);
// Why an XID makes the GPU unhealthy; empty when it is the application's fault.
std::string XidReason(int xid, const HealthRules& rules);

}  // namespace gantry
