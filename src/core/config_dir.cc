// LoadConfigDir: config files with built-in fallbacks.
#include "core/config_dir.h"

#include <cstdlib>
#include <filesystem>

#include "core/yaml_util.h"

namespace gantry {

extern const char kBuiltinGpuTypesYaml[];

Expected<ConfigSet> LoadConfigDir(const std::string& dir) {
  ConfigSet set{GpuCatalog::Builtin(), SchedulerConfig::Builtin(), QuotaConfig{}, kBuiltinGpuTypesYaml};
  if (dir.empty()) return set;
  if (!std::filesystem::is_directory(dir)) return Status::NotFound("config directory " + dir + " does not exist");
  std::string gpu_types = dir + "/gpu_types.yaml";
  if (std::filesystem::exists(gpu_types)) {
    auto text = ReadTextFile(gpu_types);
    if (!text) return text.status();
    auto c = GpuCatalog::FromYaml(*text);
    if (!c) return Status::Invalid(gpu_types + ": " + c.status().field(), c.status().message());
    set.catalog = std::move(*c);
    set.gpu_types_yaml = std::move(*text);
  }
  std::string sched = dir + "/scheduler_config.yaml";
  if (std::filesystem::exists(sched)) {
    auto c = SchedulerConfig::LoadFile(sched);
    if (!c) return Status::Invalid(sched + ": " + c.status().field(), c.status().message());
    set.scheduler = std::move(*c);
  }
  std::string quotas = dir + "/team_quotas.yaml";
  if (std::filesystem::exists(quotas)) {
    auto q = QuotaConfig::LoadFile(quotas, set.catalog);
    if (!q) return Status::Invalid(quotas + ": " + q.status().field(), q.status().message());
    set.quotas = std::move(*q);
  }
  return set;
}

std::string DefaultDataDir() {
  if (const char* d = std::getenv("GANTRY_DATA_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/gantry";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.local/share/gantry";
}

}  // namespace gantry
