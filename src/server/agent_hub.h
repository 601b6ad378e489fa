// Remote node agents on the server side: registration, the long-poll queue of orders per
// node (agents pull, so they work behind NAT and firewalls), and their reports (job
// events, readings, health). Every poll and report is also the node's heartbeat.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "server/controller.h"

namespace gantry {

class AgentHub {
 public:
  // Remote jobs' output goes to `log_dir`/<job id>/<stream>.log (none when empty).
  explicit AgentHub(Controller& controller, std::string log_dir = "")
      : controller_(controller), log_dir_(std::move(log_dir)) {}
  // Where a remote job's output is kept.
  std::string LogPath(const std::string& job_id, const std::string& stream) const;

  // POST /v1/agent/register {node_id, cpus, memory_mib, labels, inventory, runs}
  ApiResult Register(const nlohmann::json& body);
  // GET /v1/agent/orders?node=ID&session=N&ack=K&wait=S: the orders queued for the node
  // after K (each order has a sequence number; the agent acknowledges the last one it
  // applied with its next poll, so an answer lost on the way is sent again), waiting up to
  // S seconds for one. A poll of an older session (a dead agent's) gets 409 and no orders.
  ApiResult Poll(const std::string& node_id, uint64_t session, uint64_t ack, int wait_s);
  // POST /v1/agent/report {node_id, events: [...], telemetry: [...], health: [...],
  // logs: [{job_id, stream, offset, bytes, data}]}
  ApiResult Report(const nlohmann::json& body);
  // Wakes every waiting poll (shutdown).
  void Close();

 private:
  class Queue : public AgentLink {
   public:
    void Start(const StartOrder& order) override;
    void Stop(const StopOrder& order) override;
    bool remote() const override { return true; }
    std::mutex mu;
    std::condition_variable cv;
    std::deque<nlohmann::json> orders;  // each with "seq"
    uint64_t next_seq = 1;
    uint64_t session = 0;
    bool closed = false;
  };
  Queue* Find(const std::string& node_id);
  // A piece of a remote job's output, as a report carries it (data in base64).
  struct LogChunk {
    std::string job_id, stream, data;
    int64_t offset = -1;
  };
  void AppendLog(const LogChunk& chunk);

  Controller& controller_;
  std::string log_dir_;
  std::mutex log_mu_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Queue>> queues_;
};

}  // namespace gantry
