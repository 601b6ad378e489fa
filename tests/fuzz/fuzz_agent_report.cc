// libFuzzer target: what a node agent sends (a registration or a report), parsed whole as
// the server does before applying anything, and a registration's inventory mapped to a
// node. A malformed body must be refused with a Status, never crash or throw.
#include <cstdint>
#include <string>

#include "core/gpu_catalog.h"
#include "protocol/inventory.h"
#include "protocol/report_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  auto report = gantry::ParseAgentReport(body);
  auto reg = gantry::ParseRegistration(body);
  if (reg) {
    auto node = gantry::NodeFromInventory(reg->node_id, reg->inventory, gantry::GpuCatalog::Builtin(), {8, 65536});
    (void)node;
  }
  (void)report;
  return 0;
}
