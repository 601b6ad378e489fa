// The agent protocol's JSON, node to server: registration (inventory, known runs) and
// reports (job events, readings, health, log chunks), parsed whole into values before any
// of it is applied; also the runs, inventories and readings inside them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "protocol/gpu_readings.h"
#include "protocol/node_link.h"

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
  NodeNetwork network;  // "address", "ports": "FIRST-LAST" (older agents: the defaults)
};
// The body must be an object with a plain node_id; a field of the wrong type is refused
// naming its element (inventory.gpus[1], runs[0]).
Expected<Registration> ParseRegistration(const nlohmann::json& body);

// One job event of a report, in the order the agent saw them.
struct ReportEvent {
  enum class Kind : uint8_t { kStarted, kExited, kMig };
  Kind kind = Kind::kStarted;
  RunReport run;  // started, exited
  MigReport mig;  // mig
};

// POST /v1/agent/report: what a remote agent's outbox carries (NodeReports over HTTP).
struct AgentReport {
  struct LogChunk {
    std::string job_id, stream, data;  // data in base64
    int64_t offset = -1;
    int run = 0;   // the job's run (1 for the first)
    int rank = 0;  // the node's rank in the job's gang
  };
  std::string node_id;
  std::vector<ReportEvent> events;
  std::vector<std::pair<int, GpuSample>> telemetry;
  std::vector<GpuHealthChange> health;
  std::vector<NodeNotice> notices;  // [{reclaim_in_ms, source}]: the node's cloud takes it back
  std::vector<LogChunk> logs;
};
// The report's JSON without its logs (the log shipper adds those).
nlohmann::json AgentReportToJson(const AgentReport& report);
Expected<AgentReport> ParseAgentReport(const nlohmann::json& body);
// Hands a parsed report's events, readings and health changes to `to`, in order, as from
// the report's node (its logs are the caller's).
void DeliverReport(const AgentReport& report, NodeReports& to);

}  // namespace gantry
