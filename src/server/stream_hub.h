// Interactive sessions on the server (gantry exec, shell, attach): the user's upgraded
// connection waits here until the node's agent connects back for the same session (a
// remote agent dials out: it may sit behind NAT; the in-process agent gets a socketpair),
// then a thread relays the bytes both ways until either side ends. The server never reads
// the session's frames: the agent decides what runs from the order the server sent it.
// Sessions are counted per user and in all; a session no agent takes within the wait is
// answered 504.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_stream.h"
#include "core/thread_set.h"
#include "server/controller.h"
#include "state/auth.h"

namespace gantry {

struct StreamHubLimits {
  int per_user = 16;                            // open sessions of one user
  int total = 512;                              // open sessions in all
  int opens_per_minute = 60;                    // sessions one user opens in a minute
  std::chrono::milliseconds agent_wait{20000};  // for the agent to connect back
  // Connections to jobs' ports (a browser opens several at once, one per request, and
  // keeps WebSockets open), counted apart from sessions and not per minute.
  int port_per_user = 64;
  int port_total = 2048;
};

// How a port connection goes on once its first exchange is done: nothing more, the
// upstream's answer copied to the user until it ends, or bytes both ways (an upgrade).
enum class PortRelay : uint8_t { kEnd, kAnswerOnly, kBothWays };
// A port connection's first exchange, on its relay thread once the agent is there: sends
// the user's request on `agent` and answers `client` with the upstream's head.
using PortExchange = std::function<PortRelay(ByteStream& client, ByteStream& agent)>;

class StreamHub {
 public:
  StreamHub(Controller& controller, StreamHubLimits limits = {});
  ~StreamHub();  // ends every session and joins its thread

  // A session slot for `who`, before the connection is taken over; false (and why, for
  // a 429) when the user or the server has as many as allowed. Each admitted slot is given
  // back by Start (whatever becomes of the session) or Release.
  // `port`: a connection to a job's port (its own limits).
  bool Admit(const Actor& who, std::string* why, bool port = false);
  void Release(const Actor& who, bool port = false);
  // Starts a session on the node `target` names, with the user's connection: the order
  // goes to the node's link, and the connection gets 101 once the agent is there (504 if
  // it is not in time). Audited. A port connection (order.kind kPort) gets `exchange`'s
  // answer instead of 101, and is not audited one by one.
  void Start(const Actor& who, const StreamTarget& target, StreamOrder order, std::unique_ptr<ByteStream> client,
             PortExchange exchange = nullptr);
  // A remote agent's connection for `session` (GET /v1/agent/streams/ID); `node` is the
  // node its token speaks for. A session of another node, or none, closes it.
  void AgentConnected(const std::string& node, const std::string& session, std::unique_ptr<ByteStream> agent);

 private:
  struct Session {
    std::string slot;  // SlotOf(user, port)
    std::string node;
    std::unique_ptr<ByteStream> client;
    std::chrono::steady_clock::time_point deadline;
    PortExchange exchange;
  };
  // What a user's open sessions are counted under: their sessions and their port
  // connections apart.
  static std::string SlotOf(const std::string& user, bool port) { return port ? "\n" + user : user; }
  void Relay(std::string slot, std::unique_ptr<ByteStream> client, std::unique_ptr<ByteStream> agent,
             bool agent_needs_answer, PortExchange exchange);
  void ExpireLoop();
  // A session's slot is given back (DoneLocked: with mu_ held).
  void Done(const std::string& slot);
  void DoneLocked(const std::string& slot);

  Controller& controller_;
  StreamHubLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Session> waiting_;  // by session id
  std::map<std::string, int> per_user_;     // slots held (admitted, waiting or relaying), by SlotOf
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> opened_;  // each user's opens, last minute
  int total_ = 0;                                                                    // sessions
  int port_total_ = 0;                                                               // port connections
  ThreadSet relays_;
  bool closing_ = false;
  std::atomic<bool> stop_{false};
  std::thread expiry_;
};

// The HTTP answer head of an upgrade to the session protocol.
inline constexpr char kStreamUpgradeAnswer[] =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: gantry-stream\r\nConnection: Upgrade\r\n\r\n";
// A whole HTTP answer (status and a JSON error naming `field`), written on a taken-over
// connection that will not be upgraded.
std::string StreamRefusal(int status, const std::string& field, const std::string& message);

}  // namespace gantry
