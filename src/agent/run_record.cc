// Run records as small JSON files, written whole and read back field by field with defaults.
#include "agent/run_record.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "protocol/spec_json.h"

namespace gantry {

Status WriteRunRecord(const std::string& path, const RunRecord& r) {
  nlohmann::json doc = {{"job_id", r.job_id},
                        {"run", r.run},
                        {"node_id", r.node_id},
                        {"pid", r.pid},
                        {"ends_at_ms", r.ends_at_ms},
                        {"exit_file", r.exit_file},
                        {"memory_limit_mib", r.memory_limit_mib},
                        {"cgroup", r.cgroup},
                        {"mps_gpus", r.mps_gpus},
                        {"container", r.container},
                        {"container_id_file", r.container_id_file},
                        {"start_order", r.start_order},
                        {"mps_env", r.mps_env}};
  if (r.ended) {
    doc["ended"] = true;
    doc["exit_code"] = r.exit_code;
    doc["reason"] = r.reason;
    doc["ended_ms"] = r.ended_ms;
  }
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(-1, ' ', false, kReplaceBadUtf8);
  out.close();
  if (!out) return Status::Internal("cannot write the run record " + path);
  return Status::Ok();
}

Expected<RunRecord> ReadRunRecord(const std::string& path) {
  auto text = ReadFileNoThrow(path);
  if (!text) return Status::NotFound("cannot read the run record " + path);
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (!doc.is_object()) return Status::Invalid(path, "is not a run record (a JSON object)");
  RunRecord r;
  try {
    r.job_id = doc.value("job_id", "");
    r.run = doc.value("run", 0);
    r.node_id = doc.value("node_id", "");
    r.pid = doc.value("pid", 0);
    r.ends_at_ms = doc.value("ends_at_ms", TimeMs{-1});
    r.exit_file = doc.value("exit_file", "");
    r.memory_limit_mib = doc.value("memory_limit_mib", int64_t{0});
    r.cgroup = doc.value("cgroup", "");
    r.mps_gpus = doc.value("mps_gpus", std::vector<std::string>{});
    r.container = doc.value("container", "");
    r.container_id_file = doc.value("container_id_file", "");
    r.start_order = doc.value("start_order", "");
    r.mps_env = doc.value("mps_env", std::map<std::string, std::string>{});
    r.ended = doc.value("ended", false);
    r.exit_code = doc.value("exit_code", -1);
    r.reason = doc.value("reason", "");
    r.ended_ms = doc.value("ended_ms", TimeMs{-1});
  } catch (const nlohmann::json::exception& e) {
    return Status::Invalid(path, std::string("a field has the wrong type: ") + e.what());
  }
  return r;
}

}  // namespace gantry
