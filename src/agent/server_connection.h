// A remote agent's side of the node protocol over HTTP: it registers the node, long-polls
// the server for orders and hands them to the job runner (a NodeLink), and sends what the
// outbox holds as reports, with the job logs the shipper has ready. Works behind NAT and
// firewalls: the agent always calls the server, never the other way. Given several servers
// (a leader and standbys), it follows the leader: after a take-over it registers with the
// new one, its running jobs are adopted, and its reports and logs go there.
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "agent/log_shipper.h"
#include "agent/report_outbox.h"
#include "core/thread_set.h"
#include "core/token_file.h"
#include "net/leader_follower.h"
#include "protocol/node_link.h"
#include "protocol/report_wire.h"

namespace gantry {

struct ServerConnectionOptions {
  std::vector<std::string> servers = {"http://127.0.0.1:8080"};  // ParseServerList's
  std::string token;                                             // the node's agent token
  // Or a file holding it, read again whenever it changes: a Kubernetes pod's projected
  // service-account token, which the kubelet rotates.
  std::string token_file;
  std::string ca_cert;  // PEM CA for an https:// server (else the system's CAs)
  std::string node_id;
  int poll_wait_s = 20;    // longest wait of one long poll
  double heartbeat_s = 2;  // reports (a heartbeat when there is nothing else) at least this often
};

class ServerConnection {
 public:
  // Problems (refusals, an unreachable server) are written to `err`.
  ServerConnection(ServerConnectionOptions options, std::ostream& err);

  // Registers the node, retrying while the server cannot be reached; false when the server
  // refuses it (or Stop was called).
  bool Register(const Registration& registration);
  // Until Stop: takes orders and hands them to `node`; an order that cannot be read is
  // reported to `reports` as a failed start. A server that no longer knows this node (it
  // restarted, or another took over) gets `registration()` again.
  void PollOrders(NodeLink& node, NodeReports& reports, const std::function<Registration()>& registration);
  // Until Stop: sends the outbox's reports with the logs ready to ship; what the server did
  // not take goes back to the outbox.
  void SendReports(ReportOutbox& outbox, LogShipper& logs);
  // Ends the loops (a registration's retries too) within about a second.
  void Stop() { stop_ = true; }
  bool stopping() const { return stop_; }
  // The server it last talked to (the leader, once registered).
  const std::string& server() const { return poller_.current(); }

 private:
  ServerConnectionOptions options_;
  std::ostream& err_;
  std::unique_ptr<TokenFile> token_file_;
  LeaderFollower poller_;
  LeaderFollower reporter_;
  std::atomic<bool> stop_{false};
  // The token to send now (options' token, or token_file's content as it is now).
  std::string Token();
  // A session's order: a thread connects back to the server for its stream and hands it
  // to the node (the threads are joined when the order loop ends).
  void ConnectBack(const StreamOrder& order, NodeLink& node);
  ThreadSet stream_threads_;
  // A JSON request carrying the token.
  HttpRequest Request(std::string method, std::string path, std::string body);
  std::string session_;  // the poller's, from the latest registration
  uint64_t acked_ = 0;   // the last order taken
};

// The registration's JSON (POST /v1/agent/register), as ParseRegistration reads it.
nlohmann::json RegistrationToJson(const Registration& registration);

}  // namespace gantry
