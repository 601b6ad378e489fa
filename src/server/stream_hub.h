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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_stream.h"
#include "core/thread_set.h"
#include "server/auth.h"
#include "server/controller.h"

namespace gantry {

struct StreamHubLimits {
  int per_user = 16;                            // open sessions of one user
  int total = 512;                              // open sessions in all
  int opens_per_minute = 60;                    // sessions one user opens in a minute
  std::chrono::milliseconds agent_wait{20000};  // for the agent to connect back
};

class StreamHub {
 public:
  StreamHub(Controller& controller, StreamHubLimits limits = {});
  ~StreamHub();  // ends every session and joins its thread

  // A session slot for `who`, before the connection is taken over; false (and why, for
  // a 429) when the user or the server has as many as allowed. Each admitted slot is given
  // back by Start (whatever becomes of the session) or Release.
  bool Admit(const Actor& who, std::string* why);
  void Release(const Actor& who);
  // Starts a session on the node `target` names, with the user's connection: the order
  // goes to the node's link, and the connection gets 101 once the agent is there (504 if
  // it is not in time). Audited.
  void Start(const Actor& who, const StreamTarget& target, StreamOrder order, std::unique_ptr<ByteStream> client);
  // A remote agent's connection for `session` (GET /v1/agent/streams/ID); `node` is the
  // node its token speaks for. A session of another node, or none, closes it.
  void AgentConnected(const std::string& node, const std::string& session, std::unique_ptr<ByteStream> agent);

 private:
  struct Session {
    std::string user;
    std::string node;
    std::unique_ptr<ByteStream> client;
    std::chrono::steady_clock::time_point deadline;
  };
  void Relay(std::string user, std::unique_ptr<ByteStream> client, std::unique_ptr<ByteStream> agent,
             bool agent_needs_answer);
  void ExpireLoop();
  // A session's slot is given back (DoneLocked: with mu_ held).
  void Done(const std::string& user);
  void DoneLocked(const std::string& user);

  Controller& controller_;
  StreamHubLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Session> waiting_;  // by session id
  std::map<std::string, int> per_user_;     // slots held (admitted, waiting or relaying)
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> opened_;  // each user's opens, last minute
  int total_ = 0;
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
