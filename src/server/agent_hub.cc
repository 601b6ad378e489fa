// Remote agents.
#include "server/agent_hub.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "agent/inventory.h"
#include "agent/log_shipper.h"
#include "server/agent_wire.h"

namespace gantry {

void AgentHub::Queue::Start(const StartOrder& order) {
  {
    std::lock_guard<std::mutex> lock(mu);
    orders.push_back(StartOrderToJson(order));
    orders.back()["seq"] = next_seq++;
  }
  cv.notify_all();
}

void AgentHub::Queue::Stop(const StopOrder& order) {
  {
    std::lock_guard<std::mutex> lock(mu);
    orders.push_back(StopOrderToJson(order));
    orders.back()["seq"] = next_seq++;
  }
  cv.notify_all();
}

namespace {

// Reads, inside a try, every field the apply pass will read, so that a malformed body is
// refused with the element at fault named, and nothing of it is applied.
Status CheckList(const nlohmann::json& body, const char* key, const std::function<void(const nlohmann::json&)>& read) {
  if (!body.contains(key)) return Status::Ok();
  const nlohmann::json& list = body[key];
  if (!list.is_array()) return Status::Invalid(key, "must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = fmt::format("{}[{}]", key, i);
    if (!list[i].is_object()) return Status::Invalid(where, "must be an object");
    try {
      read(list[i]);
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      return Status::Invalid(where, what.substr(what.find(']') + 2));  // without "[json.exception...]"
    }
  }
  return Status::Ok();
}

Status CheckObjects(const nlohmann::json& list, const std::string& where) {
  if (!list.is_array()) return Status::Invalid(where, "must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) return Status::Invalid(fmt::format("{}[{}]", where, i), "must be an object");
  }
  return Status::Ok();
}

void Throw(const Status& s) {
  if (!s.ok()) throw nlohmann::json::other_error::create(501, s.ToString(), nullptr);
}

Status CheckRegistration(const nlohmann::json& body) {
  if (!body.is_object()) return Status::Invalid("body", "must be a JSON object");
  if (body.contains("node_id") && !body["node_id"].is_string()) return Status::Invalid("node_id", "must be a string");
  for (const char* key : {"cpus", "memory_mib"}) {
    if (body.contains(key) && !body[key].is_number_integer()) return Status::Invalid(key, "must be an integer");
  }
  if (body.contains("inventory")) {
    const nlohmann::json& inv = body["inventory"];
    if (!inv.is_object()) return Status::Invalid("inventory", "must be an object");
    Status s = CheckList(inv, "gpus", [](const nlohmann::json& g) {
      if (g.contains("mig")) Throw(CheckObjects(g["mig"], "mig"));
      InventoryFromJson({{"gpus", {g}}});
    });
    if (!s.ok()) return Status::Invalid("inventory." + s.field(), s.message());
  }
  return CheckList(body, "runs", [](const nlohmann::json& r) { RunReportFromJson(r); });
}

Status CheckReport(const nlohmann::json& body) {
  if (!body.is_object()) return Status::Invalid("body", "must be a JSON object");
  if (body.contains("node_id") && !body["node_id"].is_string()) return Status::Invalid("node_id", "must be a string");
  Status s = CheckList(body, "events", [](const nlohmann::json& e) {
    RunReportFromJson(e);
    (void)e.value("type", "");
    (void)e.value("error", "");
    (void)e.value("gpu", -1);
    if (e.contains("devices")) {
      Throw(CheckObjects(e["devices"], "devices"));
      for (const auto& m : e["devices"]) MigDeviceFromJson(m);
    }
  });
  if (s.ok()) {
    s = CheckList(body, "telemetry", [](const nlohmann::json& t) {
      (void)t.value("gpu", 0);
      const nlohmann::json& sample = FieldOr(t, "sample", EmptyObject());
      if (sample.contains("procs")) Throw(CheckObjects(sample["procs"], "sample.procs"));
      SampleFromWire(sample);
    });
  }
  if (s.ok()) {
    s = CheckList(body, "health", [](const nlohmann::json& h) {
      (void)h.value("gpu", -1);
      (void)h.value("healthy", true);
      (void)h.value("reason", "");
    });
  }
  if (s.ok()) {
    s = CheckList(body, "logs", [](const nlohmann::json& l) {
      (void)l.value("job_id", "");
      (void)l.value("stream", "");
      (void)l.value("data", "");
      (void)l.value("offset", int64_t{-1});
    });
  }
  return s;
}

}  // namespace

AgentHub::Queue* AgentHub::Find(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(node_id);
  return it == queues_.end() ? nullptr : it->second.get();
}

ApiResult AgentHub::Register(const nlohmann::json& body) {
  if (Status s = CheckRegistration(body); !s.ok()) return ApiResult::FromStatus(s);
  std::string node_id = body.value("node_id", "");
  if (node_id.empty() || node_id.size() > 128) {
    return ApiResult::Error(400, "invalid_argument", "is required (at most 128 characters)", "node_id");
  }
  auto node =
      NodeFromInventory(node_id, InventoryFromJson(FieldOr(body, "inventory", EmptyObject())), controller_.catalog());
  if (!node) return ApiResult::FromStatus(node.status());
  if (body.contains("cpus")) node->cpus = body.value("cpus", node->cpus);
  if (body.contains("memory_mib")) node->memory_mib = body.value("memory_mib", node->memory_mib);
  for (const auto& [k, v] : FieldOr(body, "labels", EmptyObject()).items()) {
    if (v.is_string()) node->labels[k] = v.get<std::string>();
  }
  std::vector<RunReport> runs;
  for (const auto& r : FieldOr(body, "runs", EmptyList())) runs.push_back(RunReportFromJson(r));
  Queue* queue = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[node_id];
    if (!q) q = std::make_unique<Queue>();
    queue = q.get();
  }
  uint64_t session = 0, first_seq = 0;
  {
    // A new session: what the old one left unacknowledged is void (the registration's run
    // list reconciles it), and polls of the old agent stop taking orders.
    std::lock_guard<std::mutex> lock(queue->mu);
    session = ++queue->session;
    queue->orders.clear();
    first_seq = queue->next_seq;
    queue->cv.notify_all();
  }
  if (Status s = controller_.AttachNodes({*node}, queue, runs); !s.ok()) return ApiResult::FromStatus(s);
  return {200, {{"node_id", node_id}, {"gpus", node->gpus.size()}, {"session", session}, {"ack", first_seq - 1}}};
}

ApiResult AgentHub::Poll(const std::string& node_id, uint64_t session, uint64_t ack, int wait_s) {
  Queue* q = Find(node_id);
  if (!q) return ApiResult::Error(404, "not_found", "node " + node_id + " is not registered: register first", "node");
  std::unique_lock<std::mutex> lock(q->mu);
  if (session != q->session) {
    return ApiResult::Error(409, "failed_precondition", "an older session of this node: register again", "session");
  }
  controller_.Heartbeat(node_id);
  while (!q->orders.empty() && q->orders.front()["seq"].get<uint64_t>() <= ack) q->orders.pop_front();
  q->cv.wait_for(lock, std::chrono::seconds(wait_s),
                 [&] { return q->closed || q->session != session || !q->orders.empty(); });
  if (q->session != session) return ApiResult::Error(409, "failed_precondition", "superseded", "session");
  nlohmann::json orders = nlohmann::json::array();
  for (const nlohmann::json& order : q->orders) orders.push_back(order);
  return {200, {{"orders", orders}}};
}

ApiResult AgentHub::Report(const nlohmann::json& body) {
  if (Status s = CheckReport(body); !s.ok()) return ApiResult::FromStatus(s);
  std::string node_id = body.value("node_id", "");
  if (!Find(node_id)) return ApiResult::Error(404, "not_found", "node " + node_id + " is not registered", "node_id");
  controller_.Heartbeat(node_id);
  for (const auto& e : FieldOr(body, "events", EmptyList())) {
    std::string type = e.value("type", "");
    if (type == "started") {
      controller_.ReportStarted(e.value("job_id", ""), e.value("run", 0));
    } else if (type == "exited") {
      controller_.ReportExited(e.value("job_id", ""), e.value("run", 0), node_id, e.value("exit_code", -1),
                               e.value("reason", ""), e.value("ended_ms", TimeMs{-1}));
    } else if (type == "mig") {
      std::vector<MigDeviceInfo> devices;
      for (const auto& m : FieldOr(e, "devices", EmptyList())) devices.push_back(MigDeviceFromJson(m));
      controller_.ReportMig(node_id, e.value("gpu", -1), std::move(devices), e.value("job_id", ""),
                            e.value("error", ""));
    }
  }
  std::vector<std::pair<int, GpuSample>> samples;
  for (const auto& t : FieldOr(body, "telemetry", EmptyList())) {
    samples.emplace_back(t.value("gpu", 0), SampleFromWire(FieldOr(t, "sample", EmptyObject())));
  }
  if (!samples.empty()) controller_.ReportTelemetry(node_id, std::move(samples));
  for (const auto& h : FieldOr(body, "health", EmptyList())) {
    controller_.ReportGpuHealth(node_id, h.value("gpu", -1), h.value("healthy", true), h.value("reason", ""));
  }
  for (const auto& l : FieldOr(body, "logs", EmptyList())) AppendLog(l);
  return {200, {{"ok", true}}};
}

std::string AgentHub::LogPath(const std::string& job_id, const std::string& stream) const {
  return log_dir_ + "/" + job_id + "/" + stream + ".log";
}

// Appends a chunk of a remote job's output at its offset. Bytes the server has already (a
// resent report, a restarted agent reading from 0) are skipped; a chunk past the end
// (bytes lost on the way) is not written.
void AgentHub::AppendLog(const nlohmann::json& entry) {
  std::string job_id = entry.value("job_id", ""), stream = entry.value("stream", "");
  if (log_dir_.empty() || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos ||
      (stream != "stdout" && stream != "stderr")) {
    return;
  }
  std::string bytes;
  if (!Base64Decode(entry.value("data", ""), &bytes)) return;
  int64_t offset = entry.value("offset", int64_t{-1});
  std::lock_guard<std::mutex> lock(log_mu_);
  std::string path = LogPath(job_id, stream);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  int64_t have = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) have = 0;
  if (offset < 0 || offset > have || offset + static_cast<int64_t>(bytes.size()) <= have) return;
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(static_cast<size_t>(have - offset));
}

void AgentHub::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, q] : queues_) {
    std::lock_guard<std::mutex> qlock(q->mu);
    q->closed = true;
    q->cv.notify_all();
  }
}

}  // namespace gantry
