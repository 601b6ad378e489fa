// Remote agents.
#include "server/agent_hub.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "agent/inventory.h"
#include "agent/log_shipper.h"
#include "agent/log_window.h"
#include "server/agent_wire.h"
#include "server/auth.h"

namespace gantry {

void AgentHub::Queue::Start(const StartOrder& order) { Push(StartOrderToJson(order)); }

void AgentHub::Queue::Stop(const StopOrder& order) { Push(StopOrderToJson(order)); }

void AgentHub::Queue::Push(nlohmann::json order) {
  std::vector<Waiter> ready;
  ApiResult answer;
  {
    std::lock_guard<std::mutex> lock(mu);
    order["seq"] = next_seq++;
    orders.push_back(std::move(order));
    answer = Orders();
    ready.swap(waiters);
  }
  for (Waiter& w : ready) w.answer(answer);  // outside the lock: an answer may write to a socket
}

ApiResult AgentHub::Queue::Orders() const {
  nlohmann::json list = nlohmann::json::array();
  for (const nlohmann::json& order : orders) list.push_back(order);
  return {200, {{"orders", list}}};
}

AgentHub::AgentHub(Controller& controller, std::string log_dir, int64_t max_log_bytes)
    : controller_(controller), log_dir_(std::move(log_dir)), max_log_bytes_(max_log_bytes) {
  timer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(timer_mu_);
    while (!closing_) {
      timer_cv_.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      ExpireWaiters(false);
      lock.lock();
    }
  });
}

AgentHub::~AgentHub() { Close(); }

void AgentHub::ExpireWaiters(bool all) {
  std::vector<std::pair<Waiter, ApiResult>> due;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, q] : queues_) {
      std::lock_guard<std::mutex> qlock(q->mu);
      auto keep = q->waiters.begin();
      for (Waiter& w : q->waiters) {
        if (all || w.deadline <= now) {
          due.emplace_back(std::move(w), q->Orders());
        } else {
          *keep++ = std::move(w);
        }
      }
      q->waiters.erase(keep, q->waiters.end());
    }
  }
  for (auto& [w, answer] : due) w.answer(answer);
}

namespace {

// Parses each element of the array `key` with `parse`; a parse that throws (a field of the
// wrong type) or an element that is not an object becomes a Status naming the element.
// Agent bodies are parsed whole before any of them is applied.
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
      return Status::Invalid(where, what.substr(what.find(']') + 2));  // without "[json.exception...]"
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

Status CheckTopLevel(const nlohmann::json& body) {
  if (!body.is_object()) return Status::Invalid("body", "must be a JSON object");
  if (body.contains("node_id") && !body["node_id"].is_string()) return Status::Invalid("node_id", "must be a string");
  for (const char* key : {"cpus", "memory_mib"}) {
    if (body.contains(key) && !body[key].is_number_integer()) return Status::Invalid(key, "must be an integer");
  }
  for (const char* key : {"inventory", "labels"}) {
    if (body.contains(key) && !body[key].is_object()) return Status::Invalid(key, "must be an object");
  }
  return Status::Ok();
}

}  // namespace

std::optional<ApiResult> AgentHub::CheckNode(const Actor& who, const std::string& node_id, const std::string& action) {
  if (who.role == Role::kAgent && who.node == node_id) return std::nullopt;
  std::string why = who.role == Role::kAgent ? fmt::format("this agent token speaks for node {} only", who.node)
                                             : "only node agents use /v1/agent/*";
  controller_.RecordAudit(who, action, node_id, 403, why);
  return ApiResult::Error(403, "forbidden", why, "node_id");
}

AgentHub::Queue* AgentHub::Find(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(node_id);
  return it == queues_.end() ? nullptr : it->second.get();
}

ApiResult AgentHub::Register(const Actor& who, const nlohmann::json& body) {
  const char* action = "POST /v1/agent/register";
  if (Status s = CheckTopLevel(body); !s.ok()) return ApiResult::FromStatus(s);
  std::string node_id = body.value("node_id", "");
  if (node_id.empty() || node_id.size() > 128) {
    return ApiResult::Error(400, "invalid_argument", "is required (at most 128 characters)", "node_id");
  }
  if (node_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
      std::string::npos) {
    return ApiResult::Error(400, "invalid_argument", "must be letters, digits and . _ -", "node_id");
  }
  if (auto refused = CheckNode(who, node_id, action)) return *refused;
  const nlohmann::json& inv_json = FieldOr(body, "inventory", EmptyObject());
  GpuInventory inventory;
  inventory.provider = FieldOr(inv_json, "provider", nlohmann::json("")).get<std::string>();
  inventory.driver_version = FieldOr(inv_json, "driver_version", nlohmann::json("")).get<std::string>();
  Status parsed = EachObject(inv_json, "gpus", [&](const nlohmann::json& g) {
    RequireObjects(g, "mig", "mig");
    inventory.gpus.push_back(GpuInfoFromJson(g));
  });
  if (!parsed.ok()) return ApiResult::FromStatus(Status::Invalid("inventory." + parsed.field(), parsed.message()));
  std::vector<RunReport> runs;
  parsed = EachObject(body, "runs", [&](const nlohmann::json& r) { runs.push_back(RunReportFromJson(r)); });
  if (!parsed.ok()) return ApiResult::FromStatus(parsed);
  auto node = NodeFromInventory(node_id, inventory, controller_.catalog());
  if (!node) return ApiResult::FromStatus(node.status());
  if (body.contains("cpus")) node->cpus = body.value("cpus", node->cpus);
  if (body.contains("memory_mib")) node->memory_mib = body.value("memory_mib", node->memory_mib);
  for (const auto& [k, v] : FieldOr(body, "labels", EmptyObject()).items()) {
    if (v.is_string()) node->labels[k] = v.get<std::string>();
  }
  Queue* queue = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[node_id];
    if (!q) q = std::make_unique<Queue>();
    queue = q.get();
  }
  std::string session = NewToken();
  uint64_t first_seq = 0;
  std::vector<Waiter> superseded;
  {
    // A new session: what the old one left unacknowledged is void (the registration's run
    // list reconciles it), and polls of the old agent stop taking orders. Before the
    // attach, so the orders the attach sends (resent starts) are this session's.
    std::lock_guard<std::mutex> lock(queue->mu);
    superseded.swap(queue->waiters);
    queue->session = session;
    queue->session_owner = who.user;
    queue->orders.clear();
    first_seq = queue->next_seq;
  }
  for (Waiter& w : superseded) w.answer(ApiResult::Error(409, "failed_precondition", "superseded", "session"));
  if (Status s = controller_.AttachNodes({*node}, queue, runs); !s.ok()) {
    controller_.RecordAudit(who, action, node_id, ApiResult::FromStatus(s).status, s.message());
    return ApiResult::FromStatus(s);
  }
  controller_.RecordAudit(who, action, node_id, 200,
                          fmt::format("{} GPU(s), {} run(s)", node->gpus.size(), runs.size()));
  return {200, {{"node_id", node_id}, {"gpus", node->gpus.size()}, {"session", session}, {"ack", first_seq - 1}}};
}

void AgentHub::Poll(const Actor& who, const std::string& node_id, const std::string& session, uint64_t ack, int wait_s,
                    std::function<void(ApiResult)> answer) {
  if (auto refused = CheckNode(who, node_id, "GET /v1/agent/orders")) return answer(*refused);
  Queue* q = Find(node_id);
  if (!q) {
    return answer(ApiResult::Error(404, "not_found", "node " + node_id + " is not registered: register first", "node"));
  }
  {
    std::lock_guard<std::mutex> lock(q->mu);
    if (q->session.empty() || session != q->session || who.user != q->session_owner) {
      return answer(
          ApiResult::Error(409, "failed_precondition", "not this node's current session: register again", "session"));
    }
    while (!q->orders.empty() && q->orders.front()["seq"].get<uint64_t>() <= ack) q->orders.pop_front();
    if (q->orders.empty() && wait_s > 0) {
      std::lock_guard<std::mutex> timer(timer_mu_);
      if (!closing_) {
        q->waiters.push_back({session, std::chrono::steady_clock::now() + std::chrono::seconds(wait_s), answer});
        answer = nullptr;
      }
    }
  }
  controller_.Heartbeat(node_id);
  if (answer) {
    std::lock_guard<std::mutex> lock(q->mu);
    answer(q->Orders());
  }
}

ApiResult AgentHub::Report(const Actor& who, const nlohmann::json& body) {
  const char* action = "POST /v1/agent/report";
  if (Status s = CheckTopLevel(body); !s.ok()) return ApiResult::FromStatus(s);
  std::string node_id = body.value("node_id", "");
  if (auto refused = CheckNode(who, node_id, action)) return *refused;
  if (!Find(node_id)) return ApiResult::Error(404, "not_found", "node " + node_id + " is not registered", "node_id");
  // Parsed whole first: a malformed element refuses the report, with nothing applied.
  std::vector<std::function<void()>> apply;
  Status parsed = EachObject(body, "events", [&](const nlohmann::json& e) {
    std::string type = e.value("type", "");
    RunReport r = RunReportFromJson(e);
    if (type == "started") {
      apply.push_back([this, r] { controller_.ReportStarted(r.job_id, r.run); });
    } else if (type == "exited") {
      apply.push_back([this, r, node_id] {
        controller_.ReportExited(r.job_id, r.run, node_id, r.exit_code, r.reason, r.ended_ms);
      });
    } else if (type == "mig") {
      RequireObjects(e, "devices", "devices");
      std::vector<MigDeviceInfo> devices;
      for (const auto& m : FieldOr(e, "devices", EmptyList())) devices.push_back(MigDeviceFromJson(m));
      int gpu = e.value("gpu", -1);
      std::string error = e.value("error", "");
      apply.push_back(
          [this, node_id, gpu, devices, r, error] { controller_.ReportMig(node_id, gpu, devices, r.job_id, error); });
    }
  });
  if (parsed.ok()) {
    std::vector<std::pair<int, GpuSample>> samples;
    parsed = EachObject(body, "telemetry", [&](const nlohmann::json& t) {
      const nlohmann::json& sample = FieldOr(t, "sample", EmptyObject());
      RequireObjects(sample, "procs", "sample.procs");
      samples.emplace_back(t.value("gpu", 0), SampleFromWire(sample));
    });
    if (!samples.empty()) apply.push_back([this, node_id, samples] { controller_.ReportTelemetry(node_id, samples); });
  }
  if (parsed.ok()) {
    parsed = EachObject(body, "health", [&](const nlohmann::json& h) {
      int gpu = h.value("gpu", -1);
      bool healthy = h.value("healthy", true);
      std::string reason = h.value("reason", "");
      apply.push_back([=, this] { controller_.ReportGpuHealth(node_id, gpu, healthy, reason); });
    });
  }
  if (parsed.ok()) {
    parsed = EachObject(body, "logs", [&](const nlohmann::json& l) {
      LogChunk chunk{l.value("job_id", ""), l.value("stream", ""), l.value("data", ""), l.value("offset", int64_t{-1})};
      apply.push_back([this, chunk] { AppendLog(chunk); });
    });
  }
  if (!parsed.ok()) {
    controller_.RecordAudit(who, action, node_id, 400, parsed.ToString());
    return ApiResult::FromStatus(parsed);
  }
  controller_.Heartbeat(node_id);
  // Job events change jobs: audited (readings and logs alone are not, they come every few seconds).
  size_t events = body.contains("events") ? body["events"].size() : 0;
  if (events > 0) controller_.RecordAudit(who, action, node_id, 200, fmt::format("{} job event(s)", events));
  for (const auto& step : apply) step();
  return {200, {{"ok", true}}};
}

std::string AgentHub::LogPath(const std::string& job_id, const std::string& stream) const {
  return log_dir_ + "/" + job_id + "/" + stream + ".log";
}

// Appends a chunk of a remote job's output at its offset. Bytes the server has already (a
// resent report, a restarted agent reading from 0) are skipped; a chunk past the end
// (bytes lost on the way) is not written.
void AgentHub::AppendLog(const LogChunk& chunk) {
  const std::string& job_id = chunk.job_id;
  const std::string& stream = chunk.stream;
  if (log_dir_.empty() || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos ||
      (stream != "stdout" && stream != "stderr")) {
    return;
  }
  std::string bytes;
  if (!Base64Decode(chunk.data, &bytes)) return;
  int64_t offset = chunk.offset;
  std::lock_guard<std::mutex> lock(log_mu_);
  std::string path = LogPath(job_id, stream);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  int64_t have = LogLogicalSize(path);
  if (offset < 0 || offset + static_cast<int64_t>(bytes.size()) <= have) return;
  if (offset > have) {
    // The agent cut its copy before these bytes were shipped: the gap is gone for good.
    std::ofstream(path, std::ios::trunc);
    std::ofstream(path + ".cut", std::ios::trunc) << offset << "\n";
    have = offset;
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(static_cast<size_t>(have - offset));
  TrimLog(path, max_log_bytes_);
}

void AgentHub::Close() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    if (closing_) return;
    closing_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  ExpireWaiters(true);
}

}  // namespace gantry
