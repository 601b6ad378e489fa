// Health rules.
#include "agent/health.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "core/scheduler_config.h"
#include "core/yaml_util.h"

namespace gantry {

extern const char kBuiltinHealthYaml[];

Expected<HealthRules> HealthRules::FromYaml(const std::string& text) {
  auto loaded = LoadYaml(text, "health");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  YamlReader r(root, "health");
  HealthRules h;
  auto drain = r.Optional<std::vector<int>>("drain_xids", {});
  auto app = r.Optional<std::vector<int>>("app_xids", {});
  h.drain_xids = {drain.begin(), drain.end()};
  h.app_xids = {app.begin(), app.end()};
  std::string unknown = r.Optional<std::string>("unknown_xid", "drain");
  h.max_temperature_c = r.Optional<double>("max_temperature_c", 92);
  h.drain_on_uncorrectable_ecc = r.Optional<bool>("drain_on_uncorrectable_ecc", true);
  h.drain_on_remap_pending = r.Optional<bool>("drain_on_remap_pending", true);
  h.check_command = r.Optional<std::string>("check_command", "");
  std::string check = r.Optional<std::string>("check_interval", "60s");
  std::string telemetry = r.Optional<std::string>("telemetry_interval", "5s");
  if (Status s = r.Finish(); !s.ok()) return s;
  if (unknown != "drain" && unknown != "ignore") {
    return Status::Invalid("health.unknown_xid", "must be drain or ignore, not '" + unknown + "'");
  }
  h.drain_unknown_xid = unknown == "drain";
  auto c = ParseDuration(check);
  if (!c || *c < 1000) return Status::Invalid("health.check_interval", "must be a duration of at least 1s");
  auto t = ParseDuration(telemetry);
  if (!t || *t < 100) return Status::Invalid("health.telemetry_interval", "must be a duration of at least 100ms");
  h.check_interval_ms = *c;
  h.telemetry_interval_ms = *t;
  return h;
}

const HealthRules& HealthRules::Builtin() {
  static const HealthRules rules = *FromYaml(kBuiltinHealthYaml);
  return rules;
}

Expected<HealthRules> HealthRules::LoadDir(const std::string& dir) {
  std::string path = dir + "/health.yaml";
  if (dir.empty() || !std::filesystem::exists(path)) return Builtin();
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  return FromYaml(*text);
}

std::string XidReason(int xid, const HealthRules& rules) {
  if (rules.drain_xids.count(xid)) {
    return xid == 79 ? "XID 79: the GPU fell off the bus" : fmt::format("XID {}: the GPU needs a reset", xid);
  }
  if (rules.app_xids.count(xid) || !rules.drain_unknown_xid) return "";
  return fmt::format("XID {}: unknown error", xid);
}

std::string UnhealthyReason(const GpuSample& s, const HealthRules& rules) {
  if (s.lost) return "the GPU is lost (it stopped answering)";
  if (s.temperature_c > rules.max_temperature_c) {
    return fmt::format("temperature {:.0f} C above {:.0f} C", s.temperature_c, rules.max_temperature_c);
  }
  if (rules.drain_on_uncorrectable_ecc && s.ecc_uncorrected > 0) {
    return fmt::format("{} uncorrectable ECC errors", s.ecc_uncorrected);
  }
  if (rules.drain_on_remap_pending && s.remap_pending > 0) return "a row remap is pending (needs a reset)";
  return "";
}

}  // namespace gantry
