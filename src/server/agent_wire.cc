// Agent protocol JSON.
#include "server/agent_wire.h"

#include <yaml-cpp/yaml.h>

#include "core/spec_yaml.h"
#include "server/job_record.h"

namespace gantry {

const nlohmann::json& FieldOr(const nlohmann::json& j, const char* key, const nlohmann::json& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->type() == fallback.type() ? *it : fallback;
}

nlohmann::json StartOrderToJson(const StartOrder& o) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const AssignedGpu& g : o.gpus) {
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"mig_uuid", g.mig_uuid},
                    {"milli", g.milli},
                    {"mps_thread_percent", g.mps_thread_percent},
                    {"memory_mib", g.memory_mib},
                    {"mig_profile", g.mig_profile},
                    {"mig_start", g.mig_start}});
  }
  nlohmann::json mig = nlohmann::json::array();
  auto specs = [](const std::vector<MigInstanceSpec>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const MigInstanceSpec& m : list) out.push_back({{"profile", m.profile}, {"start", m.start}});
    return out;
  };
  for (const MigOrder& m : o.mig) {
    mig.push_back(
        {{"gpu", m.gpu}, {"gpu_uuid", m.gpu_uuid}, {"destroy", specs(m.destroy)}, {"create", specs(m.create)}});
  }
  return {{"type", "start"},
          {"job_id", o.job_id},
          {"run", o.run},
          {"spec", SpecToJson(*o.spec)},
          {"node_id", o.node_id},
          {"node_rank", o.node_rank},
          {"num_nodes", o.num_nodes},
          {"leader_node", o.leader_node},
          {"sharing", ToString(o.sharing)},
          {"gpus", gpus},
          {"mig", mig},
          {"cpus", o.cpus},
          {"memory_mib", o.memory_mib},
          {"unix_account", o.unix_account},
          {"allow_root", o.allow_root}};
}

Expected<StartOrder> StartOrderFromJson(const nlohmann::json& j) {
  try {
    StartOrder o;
    o.job_id = j.at("job_id").get<std::string>();
    o.run = j.at("run").get<int>();
    auto spec = ParseJobSpec(YAML::Load(j.at("spec").dump()));
    if (!spec) return spec.status();
    spec->id = o.job_id;
    o.spec = std::make_shared<const JobSpec>(std::move(*spec));
    o.node_id = j.at("node_id").get<std::string>();
    o.node_rank = j.at("node_rank").get<int>();
    o.num_nodes = j.at("num_nodes").get<int>();
    o.leader_node = j.at("leader_node").get<std::string>();
    if (!ParseSharingMode(j.at("sharing").get<std::string>(), &o.sharing)) {
      return Status::Invalid("sharing", "unknown sharing mode");
    }
    for (const auto& g : j.at("gpus")) {
      o.gpus.push_back({g.at("index").get<int>(), g.at("uuid").get<std::string>(), g.at("mig_uuid").get<std::string>(),
                        g.at("milli").get<int32_t>(), g.at("mps_thread_percent").get<int>(),
                        g.at("memory_mib").get<int64_t>(), g.at("mig_profile").get<std::string>(),
                        g.value("mig_start", -1)});
    }
    auto specs = [](const nlohmann::json& list) {
      std::vector<MigInstanceSpec> out;
      for (const auto& m : list) out.push_back({m.at("profile").get<std::string>(), m.at("start").get<int>()});
      return out;
    };
    for (const auto& m : FieldOr(j, "mig", EmptyList())) {
      o.mig.push_back(
          {m.at("gpu").get<int>(), m.at("gpu_uuid").get<std::string>(), specs(m.at("destroy")), specs(m.at("create"))});
    }
    o.cpus = j.at("cpus").get<int>();
    o.memory_mib = j.at("memory_mib").get<int64_t>();
    o.unix_account = j.value("unix_account", "");
    o.allow_root = j.value("allow_root", false);
    return o;
  } catch (const std::exception& e) {
    return Status::Invalid("order", e.what());
  }
}

nlohmann::json StopOrderToJson(const StopOrder& o) {
  return {{"type", "stop"},       {"job_id", o.job_id},     {"run", o.run},
          {"node_id", o.node_id}, {"grace_ms", o.grace_ms}, {"reason", o.reason}};
}

StopOrder StopOrderFromJson(const nlohmann::json& j) {
  return {j.value("job_id", ""), j.value("run", 0), j.value("node_id", ""), j.value("grace_ms", int64_t{0}),
          j.value("reason", "")};
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
  return {{"provider", inv.provider}, {"driver_version", inv.driver_version}, {"gpus", gpus}};
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

}  // namespace gantry
