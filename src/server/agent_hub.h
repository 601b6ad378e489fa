// Remote node agents on the server side: registration, the long-poll queue of orders per
// node (agents pull, so they work behind NAT and firewalls), and their reports (job
// events, readings, health). Every poll and report is also the node's heartbeat.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "protocol/report_wire.h"
#include "server/controller.h"

namespace gantry {

class AgentHub {
 public:
  // Remote jobs' output goes under `log_dir`/<job id>/ (run-<K>/rank-<N>.<stream>.log; none
  // when empty), each job's logs kept to `max_log_bytes` in all (the newest; 0: no cap).
  explicit AgentHub(Controller& controller, std::string log_dir = "", int64_t max_log_bytes = 0);
  ~AgentHub();
  // Where a remote job's output is kept (job_logs.h names the files in it).
  std::string JobLogDir(const std::string& job_id) const;
  static constexpr int kMaxRank = 65535;

  // Each call comes from an agent token bound to one node: a call for another node is
  // refused (403) and audited.
  //
  // POST /v1/agent/register {node_id, cpus, memory_mib, labels, inventory, runs}: starts a
  // session, a random 128-bit id the token's later polls must present.
  Answer Register(const Actor& who, const nlohmann::json& body);
  // GET /v1/agent/orders?node=ID&session=S&ack=K&wait=W: the orders queued for the node
  // after K (each order has a sequence number; the agent acknowledges the last one it
  // applied with its next poll, so an answer lost on the way is sent again), waiting up to
  // W seconds for one. A poll of an older session (a dead agent's) gets 409 and no orders.
  // The answer goes to `answer` (once, from whichever thread has it: at once, or when an
  // order is queued, the session is superseded, the wait ends or the hub closes), so a
  // waiting poll holds no thread.
  void Poll(const Actor& who, const std::string& node_id, const std::string& session, uint64_t ack, int wait_s,
            std::function<void(Answer)> answer);
  // POST /v1/agent/report {node_id, events: [...], telemetry: [...], health: [...],
  // logs: [{job_id, run, rank, stream, offset, bytes, data}]}
  Answer Report(const Actor& who, const nlohmann::json& body);
  // Null when `who` may speak for `node_id`; else the refusal, audited as `action`.
  std::optional<Status> CheckNode(const Actor& who, const std::string& node_id, const std::string& action);
  // Answers every waiting poll and stops the hub's timer (shutdown).
  void Close();

 private:
  // A poll waiting for orders.
  struct Waiter {
    std::string session;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(Answer)> answer;
  };
  class Queue : public NodeLink {
   public:
    void Start(const StartOrder& order) override;
    void Stop(const StopOrder& order) override;
    // A session: the agent is told to connect back for it (GET /v1/agent/streams/ID).
    void OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream> stream) override;
    bool remote() const override { return true; }
    // Queues an order and answers the polls waiting for one.
    void Push(nlohmann::json order);
    // The answer to a poll now: every unacknowledged order (call with mu held).
    nlohmann::json Orders() const;
    // Notes a run placed on the node (a start order, or a run adopted at registration), so
    // its output (of the node's rank only) is taken from this node; the newest
    // kMaxPlacedRuns are kept (mu held).
    void NotePlaced(const PlacedRun& run);
    static constexpr size_t kMaxPlacedRuns = 4096;
    std::mutex mu;
    std::deque<nlohmann::json> orders;  // each with "seq"
    std::vector<Waiter> waiters;
    uint64_t next_seq = 1;
    std::string session;                 // random; empty before the first registration
    std::string session_owner;           // the token (user name) that registered it
    std::string pool;                    // the pool of the token that registered it ("": a node token)
    std::set<PlacedRun> placed;          // runs placed on the node
    std::deque<PlacedRun> placed_order;  // the same, oldest first
  };
  Queue* Find(const std::string& node_id);
  // The pool whose token registered the node ("" for a node's own token, or none).
  std::string QueuePool(const std::string& node_id);
  // Appends a piece of a remote job's output (its data in base64) at its offset.
  void AppendLog(const AgentReport::LogChunk& chunk);
  // Appends the report's log chunks of runs placed on its node; the others (a forged or
  // pre-seeded job's output) are dropped and audited, once per report.
  void TakeLogs(const Actor& who, const AgentReport& report);

  // Answers the polls whose wait is over (the timer thread, every 100 ms).
  void ExpireWaiters(bool all);

  Controller& controller_;
  std::string log_dir_;
  int64_t max_log_bytes_;
  std::thread timer_;
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool closing_ = false;
  std::mutex log_mu_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Queue>> queues_;
};

}  // namespace gantry
