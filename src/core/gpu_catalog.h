// GPU models: memory, relative speed, prices and MIG profiles with their placement rules.
// Loaded from gpu_types.yaml, so a new GPU model needs a config change, not a rebuild.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gantry {

using GpuTypeId = uint16_t;

// One MIG GPU-instance profile, e.g. 3g.40gb: its compute slices, the memory slots it spans
// and the slot indices where it may start (nvidia-smi mig -lgipp's "{starts}:slots").
struct MigProfile {
  std::string name;
  int compute_slices = 0;
  int memory_slots = 0;
  int64_t memory_mib = 0;
  int max_count = 0;
  std::vector<int> starts;
  bool media_engines = false;  // "+me" profiles; at most one per GPU
};

// A price that applies from a date on (gpu_types.yaml `price_changes`). The date is text
// here; billing reads it in its configured time zone ("2026-12-01" is local midnight).
struct PriceChange {
  std::string effective;
  double on_demand = 0;  // per GPU-hour
  double spot = 0;
};

struct GpuType {
  GpuTypeId id = 0;
  std::string name;
  std::vector<std::string> aliases;  // product names as NVML reports them
  int64_t memory_mib = 0;
  double relative_speed = 1.0;   // throughput relative to a V100
  double price_on_demand = 0.0;  // USD per GPU-hour
  double price_spot = 0.0;
  std::vector<PriceChange> price_changes;  // later prices, oldest first
  int mig_compute_slices = 0;              // 0: the model has no MIG
  int mig_memory_slots = 0;
  std::vector<MigProfile> mig_profiles;

  bool supports_mig() const { return mig_compute_slices > 0; }
  // Index into mig_profiles, or -1.
  int FindMigProfile(std::string_view profile) const;
};

// One instance of a MIG layout: which profile, starting at which memory slot.
struct MigPlacement {
  int profile = 0;  // index into GpuType::mig_profiles
  int start = 0;
  bool operator==(const MigPlacement&) const = default;
};

// True when `layout` is a layout this model can hold: every start allowed, no overlap,
// compute slices and per-profile counts within limits. `why` names the broken rule.
bool MigLayoutValid(const GpuType& type, const std::vector<MigPlacement>& layout, std::string* why = nullptr);

// The lowest allowed start at which `profile` fits beside `layout`, if any.
std::optional<int> FindMigStart(const GpuType& type, const std::vector<MigPlacement>& layout, int profile);

class GpuCatalog {
 public:
  // Parses gpu_types.yaml text; errors name the offending type and field.
  static Expected<GpuCatalog> FromYaml(const std::string& yaml_text);
  static Expected<GpuCatalog> LoadFile(const std::string& path);
  // The catalog compiled in from config/gpu_types.yaml.
  static const GpuCatalog& Builtin();

  const GpuType* Find(std::string_view name) const;  // by name or alias, case-insensitive
  const GpuType& Get(GpuTypeId id) const { return types_[id]; }
  const std::vector<GpuType>& types() const { return types_; }
  size_t size() const { return types_.size(); }
  std::string Names() const;  // "A100-40GB, A100-80GB, ..." for error messages

 private:
  std::vector<GpuType> types_;
};

}  // namespace gantry
