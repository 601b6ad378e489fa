// GPU catalog: YAML parsing and MIG layout rules.
#include "core/gpu_catalog.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/yaml_util.h"

namespace gantry {

extern const char kBuiltinGpuTypesYaml[];  // generated from config/gpu_types.yaml

int GpuType::FindMigProfile(std::string_view profile) const {
  for (size_t i = 0; i < mig_profiles.size(); ++i) {
    if (mig_profiles[i].name == profile) return static_cast<int>(i);
  }
  return -1;
}

bool MigLayoutValid(const GpuType& type, const std::vector<MigPlacement>& layout, std::string* why) {
  auto fail = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return false;
  };
  if (!type.supports_mig()) return fail(type.name + " has no MIG");
  uint32_t used_slots = 0;
  int compute = 0;
  int media = 0;
  std::vector<int> counts(type.mig_profiles.size(), 0);
  for (const MigPlacement& p : layout) {
    if (p.profile < 0 || p.profile >= static_cast<int>(type.mig_profiles.size())) return fail("unknown profile");
    const MigProfile& prof = type.mig_profiles[p.profile];
    if (std::find(prof.starts.begin(), prof.starts.end(), p.start) == prof.starts.end()) {
      return fail(fmt::format("{} may not start at slot {}", prof.name, p.start));
    }
    uint32_t mask = ((1u << prof.memory_slots) - 1u) << p.start;
    if (used_slots & mask) return fail(fmt::format("{} at slot {} overlaps another instance", prof.name, p.start));
    used_slots |= mask;
    compute += prof.compute_slices;
    media += prof.media_engines ? 1 : 0;
    if (++counts[p.profile] > prof.max_count) return fail(fmt::format("more than {} x {}", prof.max_count, prof.name));
  }
  if (compute > type.mig_compute_slices) {
    return fail(fmt::format("{} compute slices used, {} has {}", compute, type.name, type.mig_compute_slices));
  }
  if (media > 1) return fail("more than one +me instance");
  return true;
}

std::optional<int> FindMigStart(const GpuType& type, const std::vector<MigPlacement>& layout, int profile) {
  if (profile < 0 || profile >= static_cast<int>(type.mig_profiles.size())) return std::nullopt;
  std::vector<MigPlacement> trial = layout;
  trial.push_back({profile, 0});
  for (int start : type.mig_profiles[profile].starts) {
    trial.back().start = start;
    if (MigLayoutValid(type, trial)) return start;
  }
  return std::nullopt;
}

namespace {

Expected<MigProfile> ParseMigProfile(const YAML::Node& node, int memory_slots, const std::string& where) {
  MigProfile p;
  YamlReader r(node, where);
  p.name = r.Required<std::string>("name");
  p.compute_slices = r.Required<int>("compute");
  p.memory_slots = r.Required<int>("slots");
  p.memory_mib = static_cast<int64_t>(r.Required<double>("memory_gb") * 1024);
  p.max_count = r.Required<int>("max");
  p.starts = r.Required<std::vector<int>>("starts");
  p.media_engines = r.Optional<bool>("media_engines", false);
  if (Status s = r.Finish(); !s.ok()) return s;
  if (p.compute_slices <= 0 || p.memory_slots <= 0 || p.max_count <= 0 || p.starts.empty()) {
    return Status::Invalid(where, "compute, slots, max and starts must be positive");
  }
  for (int s : p.starts) {
    if (s < 0 || s + p.memory_slots > memory_slots) {
      return Status::Invalid(where + ".starts", fmt::format("start {} runs past {} memory slots", s, memory_slots));
    }
  }
  return p;
}

Expected<GpuType> ParseGpuType(const std::string& name, const YAML::Node& node) {
  GpuType t;
  t.name = name;
  std::string where = "gpu_types." + name;
  YamlReader r(node, where);
  t.memory_mib = static_cast<int64_t>(r.Required<double>("memory_gb") * 1024);
  t.relative_speed = r.Required<double>("relative_speed");
  t.price_on_demand = r.Required<double>("price_on_demand");
  t.price_spot = r.Optional<double>("price_spot", t.price_on_demand);
  t.aliases = r.Optional<std::vector<std::string>>("aliases", {});
  YAML::Node mig = r.Child("mig");
  YAML::Node changes = r.Child("price_changes");
  if (Status s = r.Finish(); !s.ok()) return s;
  if (changes) {
    if (!changes.IsSequence()) return Status::Invalid(where + ".price_changes", "must be a list");
    for (size_t i = 0; i < changes.size(); ++i) {
      std::string cwhere = fmt::format("{}.price_changes[{}]", where, i);
      YamlReader c(changes[i], cwhere);
      PriceChange pc;
      pc.effective = c.Required<std::string>("effective");
      pc.on_demand = c.Required<double>("on_demand");
      pc.spot = c.Optional<double>("spot", pc.on_demand);
      if (Status s = c.Finish(); !s.ok()) return s;
      if (!(pc.on_demand >= 0 && pc.spot >= 0)) return Status::Invalid(cwhere, "prices must be >= 0");
      if (!t.price_changes.empty() && pc.effective <= t.price_changes.back().effective) {
        return Status::Invalid(cwhere + ".effective", "must be later than the change before it");
      }
      t.price_changes.push_back(pc);
    }
  }
  if (t.memory_mib <= 0) return Status::Invalid(where + ".memory_gb", "must be positive");
  if (t.relative_speed <= 0) return Status::Invalid(where + ".relative_speed", "must be positive");
  if (t.price_on_demand < 0 || t.price_spot < 0)
    return Status::Invalid(where + ".price_on_demand", "prices must be >= 0");
  if (mig) {
    std::string mwhere = where + ".mig";
    YamlReader m(mig, mwhere);
    t.mig_compute_slices = m.Required<int>("compute_slices");
    t.mig_memory_slots = m.Required<int>("memory_slots");
    YAML::Node profiles = m.Child("profiles");
    if (Status s = m.Finish(); !s.ok()) return s;
    if (t.mig_compute_slices <= 0 || t.mig_memory_slots <= 0 || t.mig_memory_slots > 8) {
      return Status::Invalid(mwhere, "compute_slices must be > 0 and memory_slots within 1..8");
    }
    if (!profiles || !profiles.IsSequence()) return Status::Invalid(mwhere + ".profiles", "must be a list");
    for (size_t i = 0; i < profiles.size(); ++i) {
      auto p = ParseMigProfile(profiles[i], t.mig_memory_slots, fmt::format("{}.profiles[{}]", mwhere, i));
      if (!p) return p.status();
      t.mig_profiles.push_back(std::move(*p));
    }
  }
  return t;
}

}  // namespace

Expected<GpuCatalog> GpuCatalog::FromYaml(const std::string& yaml_text) {
  auto loaded = LoadYaml(yaml_text, "gpu_types");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  if (!root.IsMap()) return Status::Invalid("gpu_types", "missing top-level map 'gpu_types'");
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (key != "gpu_types" && key != "pricing") return Status::Invalid(key, "unknown field (gpu_types or pricing)");
  }
  YAML::Node types = root["gpu_types"];
  if (!types || !types.IsMap()) return Status::Invalid("gpu_types", "missing top-level map 'gpu_types'");
  GpuCatalog catalog;
  for (const auto& entry : types) {
    std::string name = entry.first.as<std::string>();
    if (catalog.Find(name)) return Status::Invalid("gpu_types." + name, "defined twice");
    auto t = ParseGpuType(name, entry.second);
    if (!t) return t.status();
    if (catalog.types_.size() >= 64) return Status::Invalid("gpu_types", "at most 64 GPU types");
    t->id = static_cast<GpuTypeId>(catalog.types_.size());
    catalog.types_.push_back(std::move(*t));
  }
  if (catalog.types_.empty()) return Status::Invalid("gpu_types", "no GPU types defined");
  return catalog;
}

Expected<GpuCatalog> GpuCatalog::LoadFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  return FromYaml(*text);
}

const GpuCatalog& GpuCatalog::Builtin() {
  static const GpuCatalog catalog = [] {
    auto c = FromYaml(kBuiltinGpuTypesYaml);
    if (!c) std::abort();  // the built-in file is checked by tests
    return std::move(*c);
  }();
  return catalog;
}

const GpuType* GpuCatalog::Find(std::string_view name) const {
  auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (const GpuType& t : types_) {
    if (same(t.name, name)) return &t;
    for (const std::string& a : t.aliases) {
      if (same(a, name)) return &t;
    }
  }
  return nullptr;
}

std::string GpuCatalog::Names() const {
  std::string out;
  for (const GpuType& t : types_) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

}  // namespace gantry
