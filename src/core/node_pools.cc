// Reading pools.yaml: every field checked, errors naming it.
#include "core/node_pools.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "core/duration.h"
#include "core/spec_yaml.h"
#include "core/yaml_util.h"

namespace gantry {

const char* ToString(Capacity c) { return c == Capacity::kSpot ? "spot" : "on_demand"; }

double NodePool::PricePerGpuHour(const GpuCatalog& catalog) const {
  if (price_per_gpu_hour >= 0) return price_per_gpu_hour;
  const GpuType& t = catalog.Get(type);
  return capacity == Capacity::kSpot ? t.price_spot : t.price_on_demand;
}

const NodePool* AutoscalerConfig::Find(const std::string& name) const {
  for (const NodePool& p : pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace {

// A name that is safe as a node label value, a file name and a hook argument.
bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 40 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s) {
    if (!std::islower(c) && !std::isdigit(c) && c != '-') return false;
  }
  return true;
}

Status ReadDuration(YamlReader& r, const std::string& key, const std::string& path, DurationMs* out) {
  std::string text = r.Optional<std::string>(key, "");
  if (text.empty()) return Status::Ok();
  auto d = ParseDuration(text);
  if (!d || *d <= 0 || *d > 30 * 24 * kHourMs) {
    return Status::Invalid(path, fmt::format("'{}' is not a duration within 1s..30d (like 10m)", text));
  }
  *out = *d;
  return Status::Ok();
}

Status ParsePool(const YAML::Node& node, const std::string& where, const GpuCatalog& catalog, NodePool* p) {
  YamlReader r(node, where);
  p->name = r.Required<std::string>("name");
  std::string type = r.Required<std::string>("gpu_type");
  p->gpus_per_node = r.Required<int>("gpus_per_node");
  p->cpus = r.Optional<int>("cpus", 0);
  double memory_gb = r.Optional<double>("memory_gb", 0);
  p->labels = r.Optional<std::map<std::string, std::string>>("labels", {});
  auto taints = r.Optional<std::vector<std::string>>("taints", {});
  std::string capacity = r.Optional<std::string>("capacity", "on_demand");
  p->min_nodes = r.Optional<int>("min_nodes", 0);
  p->max_nodes = r.Required<int>("max_nodes");
  p->price_per_gpu_hour = r.Optional<double>("price", -1.0);
  p->scale_up_command = r.Optional<std::string>("scale_up_command", "");
  p->scale_down_command = r.Optional<std::string>("scale_down_command", "");
  p->spot_reclaims_per_node_hour = r.Optional<double>("spot_reclaims_per_node_hour", 0.0);
  p->spot_reclaim_trace = r.Optional<std::string>("spot_reclaim_trace", "");
  if (Status s = ReadDuration(r, "startup", where + ".startup", &p->startup_ms); !s.ok()) return s;
  if (Status s = r.Finish(); !s.ok()) return s;
  if (!PlainName(p->name)) {
    return Status::Invalid(where + ".name",
                           "lower-case letters, digits and '-', at most 40, starting with a letter or digit");
  }
  const GpuType* t = catalog.Find(type);
  if (!t)
    return Status::Invalid(where + ".gpu_type",
                           fmt::format("unknown GPU type '{}' (known: {})", type, catalog.Names()));
  p->type = t->id;
  if (p->gpus_per_node < 1 || p->gpus_per_node > 64)
    return Status::Invalid(where + ".gpus_per_node", "must be within 1..64");
  if (p->cpus < 0 || p->cpus > 100000) return Status::Invalid(where + ".cpus", "must be within 0..100000");
  if (!(memory_gb >= 0 && memory_gb <= 1e6)) return Status::Invalid(where + ".memory_gb", "must be within 0..1000000");
  p->memory_mib = static_cast<int64_t>(memory_gb * 1024);
  if (capacity == "spot") {
    p->capacity = Capacity::kSpot;
  } else if (capacity != "on_demand") {
    return Status::Invalid(where + ".capacity", fmt::format("'{}': must be on_demand or spot", capacity));
  }
  if (p->max_nodes < 1 || p->max_nodes > 10000) return Status::Invalid(where + ".max_nodes", "must be within 1..10000");
  if (p->min_nodes < 0 || p->min_nodes > p->max_nodes) {
    return Status::Invalid(where + ".min_nodes", "must be within 0..max_nodes");
  }
  if (!(p->price_per_gpu_hour == -1.0 || (p->price_per_gpu_hour >= 0 && p->price_per_gpu_hour < 1e6))) {
    return Status::Invalid(where + ".price", "must be a price per GPU-hour within 0..1000000");
  }
  if (!(p->spot_reclaims_per_node_hour >= 0 && p->spot_reclaims_per_node_hour <= 100)) {
    return Status::Invalid(where + ".spot_reclaims_per_node_hour", "must be within 0..100");
  }
  if (!p->spot_reclaim_trace.empty() && p->capacity != Capacity::kSpot) {
    return Status::Invalid(where + ".spot_reclaim_trace", "only a spot pool is reclaimed");
  }
  if (p->spot_reclaims_per_node_hour > 0 && p->capacity != Capacity::kSpot) {
    return Status::Invalid(where + ".spot_reclaims_per_node_hour", "only a spot pool is reclaimed");
  }
  if (p->scale_up_command.empty() != p->scale_down_command.empty()) {
    return Status::Invalid(where + (p->scale_up_command.empty() ? ".scale_up_command" : ".scale_down_command"),
                           "a pool the controller scales needs both hooks");
  }
  for (const std::string& text : taints) p->taints.push_back(ParseTaint(text));
  auto pool_label = p->labels.find("pool");
  if (pool_label != p->labels.end() && pool_label->second != p->name) {
    return Status::Invalid(where + ".labels.pool", "is the pool's name, set by Gantry");
  }
  p->labels["pool"] = p->name;
  if (p->capacity == Capacity::kSpot) p->labels[kCapacityLabel] = "spot";
  return Status::Ok();
}

}  // namespace

Expected<AutoscalerConfig> ParseAutoscalerConfig(const YAML::Node& root, const GpuCatalog& catalog,
                                                 const std::string& where) {
  const std::string prefix = where.empty() ? "" : where + ".";
  AutoscalerConfig c;
  if (root && !root.IsNull() && !root.IsMap())
    return Status::Invalid(where.empty() ? "pools.yaml" : where, "must be a map");
  for (const auto& kv : root&& root.IsMap() ? root : YAML::Node(YAML::NodeType::Map)) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key != "autoscaler" && key != "pools")
      return Status::Invalid(prefix + key, "unknown field (autoscaler or pools)");
  }
  YAML::Node settings = root && root.IsMap() ? root["autoscaler"] : YAML::Node();
  YAML::Node pools = root && root.IsMap() ? root["pools"] : YAML::Node();
  YamlReader r(settings, prefix + "autoscaler");
  for (auto [key, out] : {std::pair{"scale_up_after", &c.scale_up_after},
                          {"scale_down_after", &c.scale_down_after},
                          {"register_timeout", &c.register_timeout},
                          {"spot_fallback_after", &c.spot_fallback_after},
                          {"hook_timeout", &c.hook_timeout}}) {
    if (Status s = ReadDuration(r, key, r.PathOf(key), out); !s.ok()) return s;
  }
  if (Status s = r.Finish(); !s.ok()) return s;
  if (pools && !pools.IsNull() && !pools.IsSequence()) return Status::Invalid(prefix + "pools", "must be a list");
  std::set<std::string> names;
  for (size_t i = 0; pools && pools.IsSequence() && i < pools.size(); ++i) {
    NodePool p;
    std::string at = fmt::format("{}pools[{}]", prefix, i);
    if (Status s = ParsePool(pools[i], at, catalog, &p); !s.ok()) return s;
    if (!names.insert(p.name).second) return Status::Invalid(at + ".name", fmt::format("'{}' is used twice", p.name));
    c.pools.push_back(std::move(p));
  }
  return c;
}

Expected<AutoscalerConfig> ParseAutoscalerYaml(const std::string& text, const GpuCatalog& catalog) {
  auto root = LoadYaml(text, "pools.yaml");
  if (!root) return root.status();
  return ParseAutoscalerConfig(*root, catalog);
}

}  // namespace gantry
