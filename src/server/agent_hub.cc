// Remote agents.
#include "server/agent_hub.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/encoding.h"
#include "core/host.h"
#include "core/job_logs.h"
#include "core/log_window.h"
#include "protocol/inventory.h"
#include "protocol/order_wire.h"
#include "state/auth.h"

namespace gantry {

void AgentHub::Queue::Start(const StartOrder& order) {
  {
    std::lock_guard<std::mutex> lock(mu);
    NotePlaced({order.job_id, order.run, order.node_rank});
  }
  Push(StartOrderToJson(order));
}

void AgentHub::Queue::NotePlaced(const PlacedRun& run) {
  if (!placed.insert(run).second) return;
  placed_order.push_back(run);
  if (placed_order.size() > kMaxPlacedRuns) {
    placed.erase(placed_order.front());
    placed_order.pop_front();
  }
}

void AgentHub::Queue::Stop(const StopOrder& order) { Push(StopOrderToJson(order)); }

void AgentHub::Queue::OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream>) {
  Push(StreamOrderToJson(order));
}

void AgentHub::Queue::Push(nlohmann::json order) {
  std::vector<Waiter> ready;
  nlohmann::json answer;
  {
    std::lock_guard<std::mutex> lock(mu);
    order["seq"] = next_seq++;
    orders.push_back(std::move(order));
    answer = Orders();
    ready.swap(waiters);
  }
  for (Waiter& w : ready) w.answer(answer);  // outside the lock: an answer may write to a socket
}

nlohmann::json AgentHub::Queue::Orders() const {
  nlohmann::json list = nlohmann::json::array();
  for (const nlohmann::json& order : orders) list.push_back(order);
  return {{"orders", list}};
}

AgentHub::AgentHub(Controller& controller, std::string log_dir, int64_t max_log_bytes)
    : controller_(controller), log_dir_(std::move(log_dir)), max_log_bytes_(max_log_bytes) {
  if (!log_dir_.empty()) {
    // Jobs' output is their owners' alone: no other account on the controller's host (a
    // local job of another team) may list or read it, whatever an older version left.
    std::error_code ec;
    std::filesystem::create_directories(log_dir_, ec);
    std::filesystem::permissions(log_dir_, std::filesystem::perms::owner_all, ec);
  }
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
  std::vector<std::pair<Waiter, Answer>> due;
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

std::optional<Status> AgentHub::CheckNode(const Actor& who, const std::string& node_id, const std::string& action) {
  if (who.role == Role::kAgent && !who.node.empty() && who.node == node_id) return std::nullopt;
  // A pool's token speaks for the nodes it registered (Register admits them).
  if (who.role == Role::kAgent && !who.pool.empty() && QueuePool(node_id) == who.pool) return std::nullopt;
  std::string why = who.role != Role::kAgent ? "only node agents use /v1/agent/*"
                    : who.pool.empty()       ? fmt::format("this agent token speaks for node {} only", who.node)
                                       : fmt::format("this agent token speaks for the nodes of pool {} only", who.pool);
  controller_.RecordAudit(who, action, node_id, "forbidden", why);
  return Status::Denied("node_id", why);
}

std::string AgentHub::QueuePool(const std::string& node_id) {
  Queue* q = Find(node_id);
  if (!q) return "";
  std::lock_guard<std::mutex> lock(q->mu);
  return q->pool;
}

AgentHub::Queue* AgentHub::Find(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(node_id);
  return it == queues_.end() ? nullptr : it->second.get();
}

Answer AgentHub::Register(const Actor& who, const nlohmann::json& body) {
  const char* action = "POST /v1/agent/register";
  auto reg = ParseRegistration(body);
  if (!reg) return reg.status();
  const std::string& node_id = reg->node_id;
  const bool pool_token = who.role == Role::kAgent && !who.pool.empty();
  if (!pool_token) {
    if (auto refused = CheckNode(who, node_id, action)) return *refused;
  }
  std::vector<RunReport>& runs = reg->runs;
  // An agent reports its node's size; one that does not (older agents) is taken to be
  // the size of this host, as before.
  NodeSize size{reg->cpus >= 0 ? static_cast<int>(reg->cpus) : HostCpus(),
                reg->memory_mib >= 0 ? reg->memory_mib : HostMemoryMib()};
  auto node = NodeFromInventory(node_id, reg->inventory, controller_.catalog(), size);
  if (!node) return node.status();
  // What the inventory says (provider, driver) is not overwritten by a label; a pool's token
  // takes no label but the fake-GPU mark (its nodes get pools.yaml's labels), so a pool node
  // cannot claim the labels another team's node_selector asks for.
  for (const auto& [k, v] : reg->labels) {
    // ... nor is what the controller keeps of Kubernetes' view (gantry.io/kube-*); and only a
    // pool's token makes a node its pool's (a fixed node's `pool` label would hand it to
    // that pool's scale-down hook).
    bool controller_fact =
        k == "gantry.io/gpu-provider" || k == "gantry.io/driver" || k.rfind("gantry.io/kube-", 0) == 0 || k == "pool";
    if (pool_token ? k == "gantry.io/fake" : !controller_fact) node->labels[k] = v;
  }
  node->network = reg->network;
  if (pool_token) {
    // A pool's token registers only what its hook started, in the pool's shape.
    node->labels["pool"] = who.pool;
    if (Status s = controller_.AdmitPoolNode(who.pool, *node); !s.ok()) {
      controller_.RecordAudit(who, action, node_id, CodeName(s.code()), s.message());
      return s;
    }
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
    queue->pool = who.pool;
    queue->orders.clear();
    first_seq = queue->next_seq;
  }
  for (Waiter& w : superseded) w.answer(Status::Precondition("session", "superseded"));
  std::vector<PlacedRun> adopted;
  if (Status s = controller_.AttachNodes({*node}, queue, runs, &adopted); !s.ok()) {
    controller_.RecordAudit(who, action, node_id, CodeName(s.code()), s.message());
    return s;
  }
  {
    std::lock_guard<std::mutex> lock(queue->mu);
    for (const PlacedRun& run : adopted) queue->NotePlaced(run);
  }
  controller_.RecordAudit(who, action, node_id, "ok",
                          fmt::format("{} GPU(s), {} run(s)", node->gpus.size(), runs.size()));
  return nlohmann::json{
      {"node_id", node_id}, {"gpus", node->gpus.size()}, {"session", session}, {"ack", first_seq - 1}};
}

void AgentHub::Poll(const Actor& who, const std::string& node_id, const std::string& session, uint64_t ack, int wait_s,
                    std::function<void(Answer)> answer) {
  if (auto refused = CheckNode(who, node_id, "GET /v1/agent/orders")) return answer(*refused);
  Queue* q = Find(node_id);
  if (!q) {
    return answer(Status(StatusCode::kNotFound, "node " + node_id + " is not registered: register first", "node"));
  }
  {
    std::lock_guard<std::mutex> lock(q->mu);
    if (q->session.empty() || session != q->session || who.user != q->session_owner) {
      return answer(Status::Precondition("session", "not this node's current session: register again"));
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

Answer AgentHub::Report(const Actor& who, const nlohmann::json& body) {
  const char* action = "POST /v1/agent/report";
  auto report = ParseAgentReport(body);  // whole first: a malformed element refuses it, nothing applied
  if (!report) {
    std::string node = body.is_object() && body.contains("node_id") && body["node_id"].is_string()
                           ? body["node_id"].get<std::string>()
                           : "";
    controller_.RecordAudit(who, action, node, "invalid_argument", report.status().ToString());
    return report.status();
  }
  const std::string& node_id = report->node_id;
  if (auto refused = CheckNode(who, node_id, action)) return *refused;
  if (!Find(node_id)) return Status(StatusCode::kNotFound, "node " + node_id + " is not registered", "node_id");
  controller_.Heartbeat(node_id);
  // Job events change jobs: audited (readings and logs alone are not, they come every few seconds).
  if (!report->events.empty()) {
    controller_.RecordAudit(who, action, node_id, "ok", fmt::format("{} job event(s)", report->events.size()));
  }
  // Output first: an exit in this report may end the job, and whoever follows its logs
  // stops at the end, so the last bytes must be there before it.
  TakeLogs(who, *report);
  DeliverReport(*report, controller_);
  return nlohmann::json{{"ok", true}};
}

std::string AgentHub::JobLogDir(const std::string& job_id) const { return log_dir_ + "/" + job_id; }

void AgentHub::TakeLogs(const Actor& who, const AgentReport& report) {
  if (report.logs.empty()) return;
  Queue* q = Find(report.node_id);
  std::set<std::pair<std::string, int>> refused;
  for (const AgentReport::LogChunk& l : report.logs) {
    bool placed = false;
    if (q) {
      std::lock_guard<std::mutex> lock(q->mu);
      placed = q->placed.count({l.job_id, l.run, l.rank}) > 0;  // this node's rank only
    }
    if (placed) {
      AppendLog(l);
    } else {
      refused.insert({l.job_id, l.run});
    }
  }
  if (refused.empty()) return;
  std::string runs;
  for (const auto& [job_id, run] : refused) {
    if (runs.size() > 200) {
      runs += " ...";
      break;
    }
    runs += fmt::format("{}{} run {}", runs.empty() ? "" : ", ", job_id, run);
  }
  controller_.RecordAudit(who, "POST /v1/agent/report (logs)", report.node_id, "forbidden",
                          fmt::format("output dropped for runs not placed on node {}: {}", report.node_id, runs));
}

// Appends a chunk of a remote job's output at its offset, to the file of its run, rank and
// stream. Bytes the server has already (a resent report, a restarted agent reading from 0)
// are skipped; a chunk past the end (bytes lost on the way) is not written.
void AgentHub::AppendLog(const AgentReport::LogChunk& chunk) {
  const std::string& job_id = chunk.job_id;
  if (log_dir_.empty() || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos ||
      !IsLogStream(chunk.stream) || chunk.run < 1 || chunk.rank < 0 || chunk.rank > kMaxRank) {
    return;
  }
  std::string bytes;
  if (!Base64Decode(chunk.data, &bytes)) return;
  int64_t offset = chunk.offset;
  std::lock_guard<std::mutex> lock(log_mu_);
  std::string path = RunLogPath(JobLogDir(job_id), chunk.run, chunk.rank, chunk.stream);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  int64_t have = LogLogicalSize(path);
  // An offset past any file's size (a compromised agent's INT64_MAX) is refused before the sum.
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (offset < 0 || offset > std::numeric_limits<int64_t>::max() - size || offset + size <= have) return;
  if (offset > have) {
    // The agent cut its copy before these bytes were shipped: the gap is gone for good.
    std::ofstream(path, std::ios::trunc);
    std::ofstream(path + ".cut", std::ios::trunc) << offset << "\n";
    have = offset;
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(static_cast<size_t>(have - offset));
  CapJobLogs(JobLogDir(job_id), max_log_bytes_);
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
