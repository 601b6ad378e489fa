// The agent protocol's JSON: orders (start, stop) from the server, and what agents send
// back (registration with inventory and known runs, job events, readings, health).
#pragma once

#include <nlohmann/json.hpp>

#include "agent/gpu_provider.h"
#include "server/agent_link.h"

namespace gantry {

// j[key] when it is there (an object or a list), else an empty one of `fallback`'s kind.
const nlohmann::json& FieldOr(const nlohmann::json& j, const char* key, const nlohmann::json& fallback);
inline const nlohmann::json& EmptyList() {
  static const nlohmann::json empty = nlohmann::json::array();
  return empty;
}
inline const nlohmann::json& EmptyObject() {
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}

nlohmann::json StartOrderToJson(const StartOrder& o);
Expected<StartOrder> StartOrderFromJson(const nlohmann::json& j);
nlohmann::json StopOrderToJson(const StopOrder& o);
StopOrder StopOrderFromJson(const nlohmann::json& j);

nlohmann::json RunReportToJson(const RunReport& r);
RunReport RunReportFromJson(const nlohmann::json& j);

nlohmann::json MigDeviceToJson(const MigDeviceInfo& m);
MigDeviceInfo MigDeviceFromJson(const nlohmann::json& m);
nlohmann::json InventoryToJson(const GpuInventory& inv);
GpuInfo GpuInfoFromJson(const nlohmann::json& g);
GpuInventory InventoryFromJson(const nlohmann::json& j);

nlohmann::json SampleToWire(const GpuSample& s);
GpuSample SampleFromWire(const nlohmann::json& j);

}  // namespace gantry
