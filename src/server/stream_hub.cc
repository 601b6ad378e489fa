// Interactive sessions: pairing a user's connection with the agent's, the relay threads,
// the wait for agents that never come, and the per-user and total limits.
#include "server/stream_hub.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/encoding.h"
#include "server/http_front.h"
#include "server/http_reply.h"

namespace gantry {

namespace {

constexpr int kWriteTimeoutMs = 30000;
// A port's answer (not an upgrade) with no byte for this long is cut: the upstream kept
// the connection open past its answer.
constexpr int kAnswerIdleMs = 300000;

// 256 random bits, URL-safe: a session id is never guessed (and only its node's agent may take it).
std::string NewSessionId() { return NewToken().substr(4); }

// The command for the audit log: each word as it is, or quoted as a JSON string when it has
// spaces, quotes or control characters (a word cannot pass for a record of its own or
// steer a terminal), cut to kMaxAuditCommand bytes.
constexpr size_t kMaxAuditCommand = 1000;
std::string QuotedCommand(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) {
      return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '\'';
    });
    if (!out.empty()) out += ' ';
    if (plain) {
      out += w;
    } else {
      out += nlohmann::json(w).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    }
    if (out.size() > kMaxAuditCommand) {
      out.resize(kMaxAuditCommand);
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace

std::string StreamRefusal(int status, const std::string& field, const std::string& message) {
  return RenderResponse(status, "application/json",
                        ErrorBody(status == 504 ? "unavailable" : "refused", message, field).dump(), true);
}

StreamHub::StreamHub(Controller& controller, StreamHubLimits limits)
    : controller_(controller), limits_(limits), expiry_([this] { ExpireLoop(); }) {}

StreamHub::~StreamHub() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    stop_ = true;
    waiting_.clear();
  }
  cv_.notify_all();
  expiry_.join();
  relays_.JoinAll();
}

bool StreamHub::Admit(const Actor& who, std::string* why, bool port) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) {
    *why = "the server is shutting down";
    return false;
  }
  auto now = std::chrono::steady_clock::now();
  const char* what = port ? "connections to jobs' ports" : "sessions";
  int& mine = per_user_[SlotOf(who.user, port)];
  if (mine >= (port ? limits_.port_per_user : limits_.per_user)) {
    *why = fmt::format("{} has {} {} open, the most one user may", who.user, mine, what);
    if (mine == 0) per_user_.erase(SlotOf(who.user, port));
    return false;
  }
  int& total = port ? port_total_ : total_;
  if (total >= (port ? limits_.port_total : limits_.total)) {
    *why = fmt::format("the server has {} {} open, the most it takes", total, what);
    if (mine == 0) per_user_.erase(SlotOf(who.user, port));
    return false;
  }
  if (!port) {
    // Opens in the last minute: a user who opens and closes sessions without end (each one
    // a process on a node and an audit record) is held to opens_per_minute.
    std::deque<std::chrono::steady_clock::time_point>& opens = opened_[who.user];
    while (!opens.empty() && now - opens.front() > std::chrono::minutes(1)) opens.pop_front();
    if (static_cast<int>(opens.size()) >= limits_.opens_per_minute) {
      *why = fmt::format("{} opened {} sessions in the last minute, the most one user may; try again shortly", who.user,
                         opens.size());
      if (mine == 0) per_user_.erase(who.user);
      return false;
    }
    opens.push_back(now);
    if (opened_.size() > 10000) {  // forget users with no open in the last minute
      for (auto it = opened_.begin(); it != opened_.end();) {
        it =
            it->second.empty() || now - it->second.back() > std::chrono::minutes(1) ? opened_.erase(it) : std::next(it);
      }
    }
  }
  ++mine;
  ++total;
  return true;
}

void StreamHub::Release(const Actor& who, bool port) { Done(SlotOf(who.user, port)); }

void StreamHub::Done(const std::string& slot) {
  std::lock_guard<std::mutex> lock(mu_);
  DoneLocked(slot);
}

void StreamHub::DoneLocked(const std::string& slot) {
  if (auto it = per_user_.find(slot); it != per_user_.end() && --it->second <= 0) per_user_.erase(it);
  --(!slot.empty() && slot[0] == '\n' ? port_total_ : total_);
}

void StreamHub::Start(const Actor& who, const StreamTarget& target, StreamOrder order,
                      std::unique_ptr<ByteStream> client, PortExchange exchange) {
  order.session = NewSessionId();
  order.job_id = target.job_id;
  order.run = target.run;
  order.node_id = target.node_id;
  order.node_rank = target.node_rank;
  order.who = who.user;
  const bool port = order.kind == StreamKind::kPort;
  const std::string slot = SlotOf(who.user, port);
  if (!port) {
    std::string what = ToString(order.kind);
    if (order.kind == StreamKind::kExec) {
      std::string command = "login shell";
      if (!order.command.empty()) command = QuotedCommand(order.command);
      what = fmt::format("exec{} {}", order.tty ? " (tty)" : "", command);
    }
    controller_.RecordAudit(
        who, fmt::format("session {}", ToString(order.kind)), target.shown_id, "ok",
        fmt::format("{} on node {} (session {})", what, target.node_id, order.session.substr(0, 8)));
  }
  if (!target.link->remote()) {
    // The in-process agent: a socketpair, one end to it, the other relayed to the user.
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      client->WriteAll(StreamRefusal(503, "id", "cannot make the session's socket"), kWriteTimeoutMs);
      return Done(slot);
    }
    target.link->OpenStream(order, std::make_unique<FdStream>(pair[1]));
    return Relay(slot, std::move(client), std::make_unique<FdStream>(pair[0]), false, std::move(exchange));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return DoneLocked(slot);
    waiting_[order.session] = {slot, target.node_id, std::move(client),
                               std::chrono::steady_clock::now() + limits_.agent_wait, std::move(exchange)};
  }
  target.link->OpenStream(order, nullptr);
}

void StreamHub::AgentConnected(const std::string& node, const std::string& session, std::unique_ptr<ByteStream> agent) {
  Session s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(session);
    if (it == waiting_.end() || it->second.node != node) {
      agent->WriteAll(StreamRefusal(404, "session", "no session " + session.substr(0, 8) + " waits for this node"),
                      kWriteTimeoutMs);
      return;
    }
    s = std::move(it->second);
    waiting_.erase(it);
  }
  Relay(s.slot, std::move(s.client), std::move(agent), true, std::move(s.exchange));
}

void StreamHub::Relay(std::string slot, std::unique_ptr<ByteStream> client, std::unique_ptr<ByteStream> agent,
                      bool agent_needs_answer, PortExchange exchange) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return DoneLocked(slot);
  }
  auto ends = std::make_shared<std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>>>(std::move(client),
                                                                                                    std::move(agent));
  relays_.Spawn([this, slot, ends, agent_needs_answer, exchange = std::move(exchange)] {
    ByteStream& client = *ends->first;
    ByteStream& agent = *ends->second;
    bool ok = true;
    if (agent_needs_answer)
      ok = agent.WriteAll(kStreamUpgradeAnswer, sizeof(kStreamUpgradeAnswer) - 1, kWriteTimeoutMs);
    PortRelay how = PortRelay::kBothWays;
    if (ok && exchange) {
      how = exchange(client, agent);
    } else if (ok) {
      ok = client.WriteAll(kStreamUpgradeAnswer, sizeof(kStreamUpgradeAnswer) - 1, kWriteTimeoutMs);
    }
    for (ByteStream* s : {&client, &agent}) {
      int on = 1;
      setsockopt(s->fd(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));  // a vanished peer ends it in time
    }
    if (ok && how == PortRelay::kBothWays) gantry::Relay(client, agent, kWriteTimeoutMs, 0, &stop_);
    if (ok && how == PortRelay::kAnswerOnly) CopyToEnd(agent, client, kWriteTimeoutMs, kAnswerIdleMs, &stop_);
    ends->first.reset();
    ends->second.reset();
    Done(slot);
  });
}

void StreamHub::ExpireLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!closing_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    auto now = std::chrono::steady_clock::now();
    std::vector<Session> late;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      late.push_back(std::move(it->second));
      it = waiting_.erase(it);
    }
    if (late.empty()) continue;
    lock.unlock();
    for (Session& s : late) {
      s.client->WriteAll(StreamRefusal(504, "id",
                                       fmt::format("the agent of node {} did not take the session in {} s", s.node,
                                                   limits_.agent_wait.count() / 1000)),
                         kWriteTimeoutMs);
      s.client.reset();
      Done(s.slot);
    }
    lock.lock();
  }
}

}  // namespace gantry
