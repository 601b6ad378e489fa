// Agent protocol JSON, node to server: registrations, reports, runs, inventories,
// readings; each parsed whole (a field of the wrong type is refused naming its element)
// before any of it is applied.
#include "protocol/report_wire.h"

#include <fmt/format.h>

#include "core/command.h"
#include "core/node.h"

namespace gantry {

const nlohmann::json& FieldOr(const nlohmann::json& j, const char* key, const nlohmann::json& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->type() == fallback.type() ? *it : fallback;
}

nlohmann::json RunReportToJson(const RunReport& r) {
  return {{"job_id", r.job_id},       {"run", r.run},       {"node_id", r.node_id},  {"exited", r.exited},
          {"exit_code", r.exit_code}, {"reason", r.reason}, {"ended_ms", r.ended_ms}};
}

RunReport RunReportFromJson(const nlohmann::json& j) {
  return {j.value("job_id", ""),    j.value("run", 0),     j.value("node_id", ""),         j.value("exited", false),
          j.value("exit_code", -1), j.value("reason", ""), j.value("ended_ms", TimeMs{-1})};
}

nlohmann::json MigDeviceToJson(const MigDeviceInfo& m) {
  return {
      {"uuid", m.uuid}, {"profile", m.profile}, {"gi", m.gpu_instance}, {"ci", m.compute_instance}, {"start", m.start}};
}

MigDeviceInfo MigDeviceFromJson(const nlohmann::json& m) {
  return {m.value("uuid", ""), m.value("profile", ""), m.value("gi", -1), m.value("ci", -1), m.value("start", -1)};
}

nlohmann::json InventoryToJson(const GpuInventory& inv) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuInfo& g : inv.gpus) {
    nlohmann::json mig = nlohmann::json::array();
    for (const MigDeviceInfo& m : g.mig_devices) {
      mig.push_back(MigDeviceToJson(m));
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"pci_bus_id", g.pci_bus_id},
                    {"memory_total_mib", g.memory_total_mib},
                    {"mig_enabled", g.mig_enabled},
                    {"nvlink_peers", g.nvlink_peers},
                    {"mig", mig}});
  }
  nlohmann::json out = {{"provider", inv.provider},
                        {"driver_version", inv.driver_version},
                        {"gpus", gpus},
                        {"mps", inv.mps},
                        {"containers", inv.containers}};
  if (!inv.containers_problem.empty()) out["containers_problem"] = inv.containers_problem;
  return out;
}

GpuInfo GpuInfoFromJson(const nlohmann::json& g) {
  GpuInfo info;
  info.index = g.value("index", 0);
  info.uuid = g.value("uuid", "");
  info.name = g.value("name", "");
  info.pci_bus_id = g.value("pci_bus_id", "");
  info.memory_total_mib = g.value("memory_total_mib", int64_t{0});
  info.mig_enabled = g.value("mig_enabled", false);
  for (const auto& m : FieldOr(g, "mig", EmptyList())) info.mig_devices.push_back(MigDeviceFromJson(m));
  for (const auto& peer : FieldOr(g, "nvlink_peers", EmptyList())) {
    if (peer.is_number_integer()) info.nvlink_peers.push_back(peer.get<int>());
  }
  return info;
}

GpuInventory InventoryFromJson(const nlohmann::json& j) {
  GpuInventory inv;
  inv.provider = j.value("provider", "");
  inv.driver_version = j.value("driver_version", "");
  inv.mps = j.value("mps", false);
  inv.containers = j.value("containers", true);
  inv.containers_problem = j.value("containers_problem", "");
  for (const auto& g : FieldOr(j, "gpus", EmptyList())) inv.gpus.push_back(GpuInfoFromJson(g));
  return inv;
}

nlohmann::json SampleToWire(const GpuSample& s) {
  nlohmann::json procs = nlohmann::json::array();
  for (const GpuProcess& p : s.processes) {
    procs.push_back(
        {{"pid", p.pid}, {"mem", p.used_memory_mib}, {"sm", p.sm_util}, {"gi", p.gpu_instance}, {"job", p.job_id}});
  }
  return {{"uuid", s.uuid},
          {"util", s.util_pct},
          {"mem_util", s.mem_util_pct},
          {"mem_used", s.mem_used_mib},
          {"mem_total", s.mem_total_mib},
          {"temp", s.temperature_c},
          {"power", s.power_w},
          {"power_limit", s.power_limit_w},
          {"sm_clock", s.sm_clock_mhz},
          {"ecc_c", s.ecc_corrected},
          {"ecc_u", s.ecc_uncorrected},
          {"retired", s.retired_pages},
          {"remap", s.remap_pending},
          {"lost", s.lost},
          {"xid", s.last_xid},
          {"xid_events", s.xid_events},
          {"sm_active", s.sm_active},
          {"sm_occupancy", s.sm_occupancy},
          {"tensor_active", s.tensor_active},
          {"dram_active", s.dram_active},
          {"ecc_u_life", s.ecc_uncorrected_lifetime},
          {"procs", procs}};
}

GpuSample SampleFromWire(const nlohmann::json& j) {
  GpuSample s;
  s.uuid = j.value("uuid", "");
  s.util_pct = j.value("util", -1.0);
  s.mem_util_pct = j.value("mem_util", -1.0);
  s.mem_used_mib = j.value("mem_used", int64_t{-1});
  s.mem_total_mib = j.value("mem_total", int64_t{-1});
  s.temperature_c = j.value("temp", -1.0);
  s.power_w = j.value("power", -1.0);
  s.power_limit_w = j.value("power_limit", -1.0);
  s.sm_clock_mhz = j.value("sm_clock", -1);
  s.ecc_corrected = j.value("ecc_c", int64_t{-1});
  s.ecc_uncorrected = j.value("ecc_u", int64_t{-1});
  s.retired_pages = j.value("retired", int64_t{-1});
  s.remap_pending = j.value("remap", -1);
  s.lost = j.value("lost", false);
  s.last_xid = j.value("xid", 0);
  s.xid_events = j.value("xid_events", int64_t{-1});
  s.sm_active = j.value("sm_active", -1.0);
  s.sm_occupancy = j.value("sm_occupancy", -1.0);
  s.tensor_active = j.value("tensor_active", -1.0);
  s.dram_active = j.value("dram_active", -1.0);
  s.ecc_uncorrected_lifetime = j.value("ecc_u_life", int64_t{-1});
  for (const auto& p : FieldOr(j, "procs", EmptyList())) {
    s.processes.push_back(
        {p.value("pid", 0), p.value("mem", int64_t{0}), p.value("sm", -1), p.value("gi", -1), p.value("job", "")});
  }
  return s;
}

namespace {

// Parses each element of the array `key` with `parse`; a parse that throws (a field of the
// wrong type) or an element that is not an object becomes a Status naming the element.
Status EachObject(const nlohmann::json& body, const char* key,
                  const std::function<void(const nlohmann::json&)>& parse) {
  if (!body.contains(key)) return Status::Ok();
  const nlohmann::json& list = body[key];
  if (!list.is_array()) return Status::Invalid(key, "must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = fmt::format("{}[{}]", key, i);
    if (!list[i].is_object()) return Status::Invalid(where, "must be an object");
    try {
      parse(list[i]);
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      size_t bracket = what.find(']');
      return Status::Invalid(where, bracket == std::string::npos ? what : what.substr(bracket + 2));
    }
  }
  return Status::Ok();
}

// Inside a parse: nested lists must hold objects too (else the error names the list).
void RequireObjects(const nlohmann::json& parent, const char* key, const std::string& where) {
  if (!parent.contains(key)) return;
  const nlohmann::json& list = parent[key];
  std::string bad = !list.is_array() ? where + ": must be an array" : "";
  for (size_t i = 0; bad.empty() && i < list.size(); ++i) {
    if (!list[i].is_object()) bad = fmt::format("{}[{}]: must be an object", where, i);
  }
  if (!bad.empty()) throw nlohmann::json::other_error::create(501, bad, nullptr);
}

Status CheckTopLevel(const nlohmann::json& body, std::string* node_id) {
  if (!body.is_object()) return Status::Invalid("body", "must be a JSON object");
  if (body.contains("node_id") && !body["node_id"].is_string()) return Status::Invalid("node_id", "must be a string");
  for (const char* key : {"cpus", "memory_mib"}) {
    if (body.contains(key) && !body[key].is_number_integer()) return Status::Invalid(key, "must be an integer");
  }
  for (const char* key : {"inventory", "labels"}) {
    if (body.contains(key) && !body[key].is_object()) return Status::Invalid(key, "must be an object");
  }
  *node_id = body.value("node_id", "");
  if (node_id->empty()) return Status::Invalid("node_id", "is required");
  if (!IsNodeId(*node_id)) return Status::Invalid("node_id", std::string("must be ") + kNodeIdRule);
  return Status::Ok();
}

}  // namespace

Expected<Registration> ParseRegistration(const nlohmann::json& body) {
  Registration reg;
  if (Status s = CheckTopLevel(body, &reg.node_id); !s.ok()) return s;
  const nlohmann::json& inv = FieldOr(body, "inventory", EmptyObject());
  try {
    reg.inventory.provider = FieldOr(inv, "provider", nlohmann::json("")).get<std::string>();
    reg.inventory.driver_version = FieldOr(inv, "driver_version", nlohmann::json("")).get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return Status::Invalid("inventory", "provider and driver_version must be strings");
  }
  if (inv.contains("mps") && !inv["mps"].is_boolean()) return Status::Invalid("inventory.mps", "must be true or false");
  reg.inventory.mps = inv.value("mps", false);
  if (inv.contains("containers") && !inv["containers"].is_boolean()) {
    return Status::Invalid("inventory.containers", "must be true or false");
  }
  if (inv.contains("containers_problem") && !inv["containers_problem"].is_string()) {
    return Status::Invalid("inventory.containers_problem", "must be a string");
  }
  reg.inventory.containers = inv.value("containers", true);
  // Shown to users as the reason their container job waits: one line, bounded.
  reg.inventory.containers_problem = OneLineExcerpt(inv.value("containers_problem", ""), 300);
  Status parsed = EachObject(inv, "gpus", [&](const nlohmann::json& g) {
    RequireObjects(g, "mig", "mig");
    reg.inventory.gpus.push_back(GpuInfoFromJson(g));
  });
  if (!parsed.ok()) return Status::Invalid("inventory." + parsed.field(), parsed.message());
  // A run the agent reports is its own node's, whatever the entry says.
  parsed = EachObject(body, "runs", [&](const nlohmann::json& r) {
    reg.runs.push_back(RunReportFromJson(r));
    reg.runs.back().node_id = reg.node_id;
  });
  if (!parsed.ok()) return parsed;
  if (body.contains("cpus")) reg.cpus = body["cpus"].get<int64_t>();
  if (body.contains("memory_mib")) reg.memory_mib = body["memory_mib"].get<int64_t>();
  if (reg.cpus < -1 || reg.cpus > 1'000'000) return Status::Invalid("cpus", "must be within 0..1000000");
  if (reg.memory_mib < -1 || reg.memory_mib > (int64_t{1} << 40)) {
    return Status::Invalid("memory_mib", "must be within 0..2^40");
  }
  for (const auto& [k, v] : FieldOr(body, "labels", EmptyObject()).items()) {
    if (v.is_string()) reg.labels[k] = v.get<std::string>();
  }
  if (body.contains("address")) {
    if (!body["address"].is_string()) return Status::Invalid("address", "must be a string");
    reg.network.address = body["address"].get<std::string>();
  }
  if (body.contains("ports")) {
    if (!body["ports"].is_string() ||
        !ParsePortRange(body["ports"].get<std::string>(), &reg.network.port_first, &reg.network.port_last)) {
      return Status::Invalid("ports", "must be a range FIRST-LAST within 1024-65535");
    }
  }
  if (Status s = ValidateNodeNetwork(reg.network, "node"); !s.ok()) return s;
  return reg;
}

Expected<AgentReport> ParseAgentReport(const nlohmann::json& body) {
  AgentReport report;
  if (Status s = CheckTopLevel(body, &report.node_id); !s.ok()) return s;
  Status parsed = EachObject(body, "events", [&](const nlohmann::json& e) {
    std::string type = e.value("type", "");
    ReportEvent ev;
    ev.run = RunReportFromJson(e);
    ev.run.node_id = report.node_id;
    if (type == "started") {
      ev.kind = ReportEvent::Kind::kStarted;
    } else if (type == "exited") {
      ev.kind = ReportEvent::Kind::kExited;
      ev.run.exited = true;
    } else if (type == "mig") {
      ev.kind = ReportEvent::Kind::kMig;
      ev.mig = {report.node_id, e.value("gpu", -1), {}, ev.run.job_id, e.value("error", "")};
      RequireObjects(e, "devices", "devices");
      for (const auto& m : FieldOr(e, "devices", EmptyList())) ev.mig.devices.push_back(MigDeviceFromJson(m));
    } else {
      return;  // an event of a newer agent: skipped
    }
    report.events.push_back(std::move(ev));
  });
  if (parsed.ok()) {
    parsed = EachObject(body, "telemetry", [&](const nlohmann::json& t) {
      const nlohmann::json& sample = FieldOr(t, "sample", EmptyObject());
      RequireObjects(sample, "procs", "sample.procs");
      report.telemetry.emplace_back(t.value("gpu", 0), SampleFromWire(sample));
    });
  }
  if (parsed.ok()) {
    parsed = EachObject(body, "health", [&](const nlohmann::json& h) {
      report.health.push_back({report.node_id, h.value("gpu", -1), h.value("healthy", true), h.value("reason", "")});
    });
  }
  if (parsed.ok()) {
    parsed = EachObject(body, "notices", [&](const nlohmann::json& n) {
      constexpr int64_t kMaxNoticeMs = 24 * kHourMs;
      auto in = n.find("reclaim_in_ms");
      if (in == n.end() || !in->is_number_integer() || in->get<int64_t>() < 0 || in->get<int64_t>() > kMaxNoticeMs) {
        throw nlohmann::json::other_error::create(501, "reclaim_in_ms: must be an integer within 0..86400000", nullptr);
      }
      report.notices.push_back({report.node_id, in->get<int64_t>(), OneLineExcerpt(n.value("source", ""))});
    });
  }
  if (parsed.ok()) {
    parsed = EachObject(body, "logs", [&](const nlohmann::json& l) {
      report.logs.push_back({l.value("job_id", ""), l.value("stream", ""), l.value("data", ""),
                             l.value("offset", int64_t{-1}), l.value("run", 0), l.value("rank", 0)});
    });
  }
  if (!parsed.ok()) return parsed;
  return report;
}

nlohmann::json AgentReportToJson(const AgentReport& report) {
  nlohmann::json events = nlohmann::json::array();
  for (const ReportEvent& e : report.events) {
    const RunReport& r = e.run;
    switch (e.kind) {
      case ReportEvent::Kind::kStarted:
        events.push_back({{"type", "started"}, {"job_id", r.job_id}, {"run", r.run}});
        break;
      case ReportEvent::Kind::kExited:
        events.push_back({{"type", "exited"},
                          {"job_id", r.job_id},
                          {"run", r.run},
                          {"exit_code", r.exit_code},
                          {"reason", r.reason},
                          {"ended_ms", r.ended_ms}});
        break;
      case ReportEvent::Kind::kMig: {
        nlohmann::json devices = nlohmann::json::array();
        for (const MigDeviceInfo& m : e.mig.devices) devices.push_back(MigDeviceToJson(m));
        events.push_back({{"type", "mig"},
                          {"gpu", e.mig.gpu},
                          {"devices", devices},
                          {"job_id", e.mig.job_id},
                          {"error", e.mig.error}});
        break;
      }
    }
  }
  nlohmann::json telemetry = nlohmann::json::array();
  for (const auto& [gpu, sample] : report.telemetry)
    telemetry.push_back({{"gpu", gpu}, {"sample", SampleToWire(sample)}});
  nlohmann::json health = nlohmann::json::array();
  for (const GpuHealthChange& h : report.health) {
    health.push_back({{"gpu", h.gpu}, {"healthy", h.healthy}, {"reason", h.reason}});
  }
  nlohmann::json out = {{"node_id", report.node_id}, {"events", events}, {"telemetry", telemetry}, {"health", health}};
  for (const NodeNotice& n : report.notices) {
    out["notices"].push_back({{"reclaim_in_ms", n.reclaim_in_ms}, {"source", n.source}});
  }
  return out;
}

void DeliverReport(const AgentReport& report, NodeReports& to) {
  for (const ReportEvent& e : report.events) {
    switch (e.kind) {
      case ReportEvent::Kind::kStarted: to.RunStarted(e.run); break;
      case ReportEvent::Kind::kExited: to.RunExited(e.run); break;
      case ReportEvent::Kind::kMig: to.MigChanged(e.mig); break;
    }
  }
  if (!report.telemetry.empty()) to.Readings({report.node_id, report.telemetry});
  for (const GpuHealthChange& h : report.health) to.GpuHealth(h);
  for (const NodeNotice& n : report.notices) to.Reclaim(n);
}

}  // namespace gantry
