// Parsing of --fake-gpus.
#include "agent/fake_gpus.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <map>

namespace gantry {

namespace {

bool ParseCount(const std::string& text, int lo, int hi, int* out) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size() && *out >= lo && *out <= hi;
}

}  // namespace

Expected<std::vector<Node>> ParseFakeGpus(const std::string& spec, const GpuCatalog& catalog) {
  std::vector<Node> nodes;
  std::map<std::string, int> per_type;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string part = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    size_t x1 = part.find('x');
    size_t x2 = x1 == std::string::npos ? std::string::npos : part.find('x', x1 + 1);
    int count = 0, gpus = 0;
    if (x2 == std::string::npos || !ParseCount(part.substr(0, x1), 1, 1000, &count) ||
        !ParseCount(part.substr(x1 + 1, x2 - x1 - 1), 1, 64, &gpus)) {
      return Status::Invalid("fake-gpus", fmt::format("'{}' is not NODESxGPUSxTYPE (e.g. 2x8xA100-80GB)", part));
    }
    std::string type_name = part.substr(x2 + 1);
    bool mig = false;
    if (type_name.size() > 4 && type_name.substr(type_name.size() - 4) == ":mig") {
      mig = true;
      type_name.resize(type_name.size() - 4);
    }
    const GpuType* type = catalog.Find(type_name);
    if (!type) {
      return Status::Invalid("fake-gpus", fmt::format("unknown GPU type '{}' (known: {})", type_name, catalog.Names()));
    }
    if (mig && !type->supports_mig()) return Status::Invalid("fake-gpus", type->name + " has no MIG");
    std::string base;
    for (char c : type->name) base += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (int n = 0; n < count; ++n) {
      Node node;
      node.id = fmt::format("{}-{}", base, per_type[base]++);
      node.cpus = 8 * gpus;
      node.memory_mib = int64_t{64} * 1024 * gpus;
      node.labels["gantry.io/fake"] = "true";
      node.mps = true;
      for (int g = 0; g < gpus; ++g) {
        Gpu gpu;
        gpu.index = g;
        gpu.uuid = fmt::format("GPU-fake-{}-{}", node.id, g);
        gpu.type = type->id;
        gpu.mig_enabled = mig;
        node.gpus.push_back(gpu);
      }
      nodes.push_back(std::move(node));
    }
  }
  if (nodes.size() > 1000) return Status::Invalid("fake-gpus", "more than 1000 nodes");
  return nodes;
}

}  // namespace gantry
