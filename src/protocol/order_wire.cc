// Agent protocol JSON: the orders the server sends (start, stop).
#include "protocol/order_wire.h"

#include <yaml-cpp/yaml.h>

#include "core/spec_yaml.h"
#include "protocol/spec_json.h"

namespace gantry {

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
          {"master_addr", o.master_addr},
          {"master_port", o.master_port},
          {"node_address", o.node_address},
          {"ports", o.ports},
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
    o.master_addr = j.value("master_addr", "");  // older servers: none
    o.master_port = j.value("master_port", 0);
    o.node_address = j.value("node_address", "");
    o.ports = j.value("ports", std::map<std::string, int>{});
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
  return {j.value("job_id", ""),           j.value("run", 0),     j.value("node_id", ""),
          j.value("grace_ms", int64_t{0}), j.value("reason", ""), ""};
}

const char* ToString(StreamKind kind) {
  switch (kind) {
    case StreamKind::kExec: return "exec";
    case StreamKind::kAttach: return "attach";
    case StreamKind::kPort: return "port";
  }
  return "exec";
}

bool ParseStreamKind(const std::string& text, StreamKind* out) {
  for (StreamKind k : {StreamKind::kExec, StreamKind::kAttach, StreamKind::kPort}) {
    if (text == ToString(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

nlohmann::json StreamOrderToJson(const StreamOrder& o) {
  return {{"type", "stream"},
          {"session", o.session},
          {"job_id", o.job_id},
          {"run", o.run},
          {"node_id", o.node_id},
          {"node_rank", o.node_rank},
          {"kind", ToString(o.kind)},
          {"command", o.command},
          {"tty", o.tty},
          {"cols", o.cols},
          {"rows", o.rows},
          {"port", o.port},
          {"end_job", o.end_job},
          {"who", o.who}};
}

Expected<StreamOrder> StreamOrderFromJson(const nlohmann::json& j) {
  try {
    StreamOrder o;
    o.session = j.at("session").get<std::string>();
    o.job_id = j.at("job_id").get<std::string>();
    o.run = j.at("run").get<int>();
    o.node_id = j.at("node_id").get<std::string>();
    o.node_rank = j.value("node_rank", 0);
    if (!ParseStreamKind(j.at("kind").get<std::string>(), &o.kind)) return Status::Invalid("kind", "unknown kind");
    o.command = j.value("command", std::vector<std::string>{});
    o.tty = j.value("tty", false);
    o.cols = j.value("cols", 80);
    o.rows = j.value("rows", 24);
    o.port = j.value("port", 0);
    o.end_job = j.value("end_job", false);
    o.who = j.value("who", "");
    return o;
  } catch (const std::exception& e) {
    return Status::Invalid("order", e.what());
  }
}

}  // namespace gantry
