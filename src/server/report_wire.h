// The agent protocol's JSON, node to server: registration (inventory, known runs) and
// reports (job events, readings, health, log chunks), parsed whole into values before any
// of it is applied; also the runs, inventories and readings inside them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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

nlohmann::json RunReportToJson(const RunReport& r);
RunReport RunReportFromJson(const nlohmann::json& j);

nlohmann::json MigDeviceToJson(const MigDeviceInfo& m);
MigDeviceInfo MigDeviceFromJson(const nlohmann::json& m);
nlohmann::json InventoryToJson(const GpuInventory& inv);
GpuInfo GpuInfoFromJson(const nlohmann::json& g);
GpuInventory InventoryFromJson(const nlohmann::json& j);

nlohmann::json SampleToWire(const GpuSample& s);
GpuSample SampleFromWire(const nlohmann::json& j);

// POST /v1/agent/register, parsed.
struct Registration {
  std::string node_id;
  GpuInventory inventory;
  std::vector<RunReport> runs;
  int64_t cpus = -1;        // -1: not given
  int64_t memory_mib = -1;  // -1: not given
  std::map<std::string, std::string> labels;
};
// The body must be an object with a plain node_id; a field of the wrong type is refused
// naming its element (inventory.gpus[1], runs[0]).
Expected<Registration> ParseRegistration(const nlohmann::json& body);

// POST /v1/agent/report, parsed.
struct AgentReport {
  struct Event {
    std::string type;  // started, exited, mig
    RunReport run;
    int gpu = -1;  // mig
    std::vector<MigDeviceInfo> devices;
    std::string error;
  };
  struct Health {
    int gpu = -1;
    bool healthy = true;
    std::string reason;
  };
  struct LogChunk {
    std::string job_id, stream, data;  // data in base64
    int64_t offset = -1;
  };
  std::string node_id;
  std::vector<Event> events;
  std::vector<std::pair<int, GpuSample>> telemetry;
  std::vector<Health> health;
  std::vector<LogChunk> logs;
};
Expected<AgentReport> ParseAgentReport(const nlohmann::json& body);

}  // namespace gantry
