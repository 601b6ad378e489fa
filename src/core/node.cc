// Node state names and node validation.
#include "core/node.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace gantry {

bool IsNodeId(std::string_view id) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (id.empty() || id.size() > 128 || !alnum(id[0])) return false;
  return std::all_of(id.begin(), id.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

const char* ToString(NodeState s) {
  switch (s) {
    case NodeState::kUp: return "up";
    case NodeState::kDraining: return "draining";
    case NodeState::kDrained: return "drained";
    case NodeState::kDown: return "down";
  }
  return "?";
}

bool ParsePortRange(const std::string& text, int* first, int* last) {
  size_t dash = text.find('-');
  if (dash == std::string::npos) return false;
  auto number = [](std::string_view digits, int* out) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
    return ec == std::errc() && end == digits.data() + digits.size() && !digits.empty();
  };
  std::string_view all(text);
  return number(all.substr(0, dash), first) && number(all.substr(dash + 1), last) && *first >= 1024 && *last <= 65535 &&
         *first <= *last;
}

Status ValidateNodeNetwork(const NodeNetwork& network, const std::string& field) {
  const std::string& a = network.address;
  if (a.size() > 253 ||
      a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != std::string::npos) {
    return Status::Invalid(field + ".address", "must be a host name or IP address (letters, digits, . - :)");
  }
  if (network.port_first < 1024 || network.port_last > 65535 || network.port_first > network.port_last) {
    return Status::Invalid(field + ".ports", "must be a range FIRST-LAST within 1024-65535");
  }
  return Status::Ok();
}

Status ValidateNode(const Node& node, const GpuCatalog& catalog) {
  if (node.id.empty()) return Status::Invalid("id", "node id is empty");
  std::string where = "nodes." + node.id;
  if (node.gpus.size() > 64) return Status::Invalid(where + ".gpus", "at most 64 GPUs per node");
  if (node.cpus < 0) return Status::Invalid(where + ".cpus", "must be >= 0");
  if (node.memory_mib < 0) return Status::Invalid(where + ".memory", "must be >= 0");
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const Gpu& g = node.gpus[i];
    if (g.type >= catalog.size()) return Status::Invalid(where + ".gpus", "unknown GPU type id");
    if (g.type != node.gpu_type()) return Status::Invalid(where + ".gpus", "a node holds one GPU model");
    if (g.index != static_cast<int>(i)) {
      return Status::Invalid(where + ".gpus",
                             fmt::format("GPU {} has index {}; indices run 0..n-1 in order", i, g.index));
    }
    const GpuType& type = catalog.Get(g.type);
    if (g.mig_enabled) {
      std::vector<MigPlacement> layout;
      for (const MigInstance& m : g.mig_instances) layout.push_back(m.placement);
      std::string why;
      if (!MigLayoutValid(type, layout, &why)) {
        return Status::Invalid(fmt::format("{}.gpus[{}].mig", where, g.index), why);
      }
    } else if (!g.mig_instances.empty()) {
      return Status::Invalid(fmt::format("{}.gpus[{}].mig", where, g.index), "MIG instances on a GPU without MIG mode");
    }
  }
  return Status::Ok();
}

}  // namespace gantry
