// The site's GPU sharing settings: parsing, the mode a plain fraction gets on a node, and
// the sharing slow-down model.
#include "core/sharing_config.h"

#include <fmt/format.h>

#include "core/yaml_util.h"

namespace gantry {

SharingMode ResolveSharing(const SharingConfig& config, const Node& node, const GpuType& type) {
  SharingMode mode = config.fraction_default;
  auto pool = node.labels.find(config.pool_label);
  auto by_pool = pool == node.labels.end() ? config.by_pool.end() : config.by_pool.find(pool->second);
  if (by_pool != config.by_pool.end()) {
    mode = by_pool->second;
  } else if (auto by_type = config.by_gpu_type.find(type.name); by_type != config.by_gpu_type.end()) {
    mode = by_type->second;
  }
  if (mode == SharingMode::kTimeSlice) return mode;
  return node.mps ? SharingMode::kMps : SharingMode::kTimeSlice;
}

double SharedSpeed(const SharingConfig& config, SharingMode mode, int jobs) {
  if (jobs <= 1 || (mode != SharingMode::kTimeSlice && mode != SharingMode::kMps)) return 1.0;
  const std::map<int, double>& points = mode == SharingMode::kMps ? config.mps_speed : config.time_slice_speed;
  int below_n = 1;
  double below_speed = 1.0;
  for (const auto& [n, speed] : points) {
    if (n == jobs) return speed;
    if (n > jobs) {  // between two points: linear
      double t = static_cast<double>(jobs - below_n) / (n - below_n);
      return below_speed + t * (speed - below_speed);
    }
    below_n = n;
    below_speed = speed;
  }
  return below_speed * below_n / jobs;  // past the last point the GPU's total stays
}

bool ParseFractionSharing(const std::string& text, SharingMode* out) {
  SharingMode m;
  if (!ParseSharingMode(text, &m) ||
      (m != SharingMode::kAuto && m != SharingMode::kMps && m != SharingMode::kTimeSlice)) {
    return false;
  }
  *out = m;
  return true;
}

namespace {

Status ReadMode(const std::string& field, const std::string& text, SharingMode* out) {
  if (ParseFractionSharing(text, out)) return Status::Ok();
  return Status::Invalid(field, "must be auto, mps or time-slice, not '" + text + "'");
}

Status ReadModes(const std::string& field, const std::map<std::string, std::string>& in,
                 std::map<std::string, SharingMode>* out) {
  for (const auto& [key, text] : in) {
    if (Status s = ReadMode(field + "." + key, text, &(*out)[key]); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ReadSpeeds(const std::string& field, const std::map<int, double>& in, std::map<int, double>* out) {
  if (in.empty()) return Status::Ok();
  for (const auto& [n, speed] : in) {
    if (n < 2 || n > 48) return Status::Invalid(field, fmt::format("job counts must be within 2..48, got {}", n));
    if (!(speed > 0 && speed <= 2)) {
      return Status::Invalid(fmt::format("{}.{}", field, n), fmt::format("must be in (0, 2], got {:g}", speed));
    }
  }
  *out = in;
  return Status::Ok();
}

}  // namespace

Status ParseSharingConfig(const YAML::Node& node, SharingConfig* out) {
  SharingConfig c;
  YamlReader r(node, "sharing");
  std::string fraction_default = r.Optional<std::string>("default", "auto");
  c.pool_label = r.Optional<std::string>("pool_label", c.pool_label);
  auto by_pool = r.Optional<std::map<std::string, std::string>>("by_pool", {});
  auto by_type = r.Optional<std::map<std::string, std::string>>("by_gpu_type", {});
  c.time_slice_packing = r.Optional<bool>("time_slice_packing", c.time_slice_packing);
  YAML::Node speed = r.Child("speed");
  if (Status s = r.Finish(); !s.ok()) return s;
  if (Status s = ReadMode("sharing.default", fraction_default, &c.fraction_default); !s.ok()) return s;
  if (Status s = ReadModes("sharing.by_pool", by_pool, &c.by_pool); !s.ok()) return s;
  if (Status s = ReadModes("sharing.by_gpu_type", by_type, &c.by_gpu_type); !s.ok()) return s;
  YamlReader sp(speed, "sharing.speed");
  auto time_slice = sp.Optional<std::map<int, double>>("time-slice", {});
  auto mps = sp.Optional<std::map<int, double>>("mps", {});
  if (Status s = sp.Finish(); !s.ok()) return s;
  if (Status s = ReadSpeeds("sharing.speed.time-slice", time_slice, &c.time_slice_speed); !s.ok()) return s;
  if (Status s = ReadSpeeds("sharing.speed.mps", mps, &c.mps_speed); !s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace gantry
