// Requests to whichever of several servers leads. A standby answers 503 with the leader's
// URL (server/leader_lease.h); an HTTP client here sends to the server it last found
// leading and, when that one does not answer or stands by, moves to the leader a standby
// named, else to the next address, until one leads or its time is up. The agent and the
// CLI both use it, so a take-over needs no change on either side.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/http_exchange.h"

namespace gantry {

// "http://a:8080,https://b:8443, c:8080" → one URL each (http:// when none is given).
// Empty entries, or an address with spaces or shell syntax, are an error naming `field`.
Expected<std::vector<std::string>> ParseServerList(const std::string& list, const std::string& field);

// The leader's URL from a standby's answer (503, {"error": {"leader": URL}}); "" for any
// other answer. `*standby` says whether it was a standby's answer at all.
std::string LeaderFromAnswer(const HttpResponse& answer, bool* standby);

// Whether a standby's word (`leader`, answered by the server at `from`) is taken: an
// address like the ones a user gives (ParseServerList's), and never https to plain http
// (the token would travel in clear).
bool MayFollowLeader(const std::string& leader, const std::string& from);

class LeaderFollower {
 public:
  // `connect` makes the connection to each address (its transport, timeouts, CA). One
  // thread at a time.
  LeaderFollower(std::vector<std::string> urls, HttpConnector connect);
  ~LeaderFollower();

  // Sends `request` to the server believed to lead and returns the first answer that is
  // not a standby's. No answer, or a standby's: the next candidate is tried at once (the
  // leader a standby named, else the next address); after a round with no leader, it waits
  // a second and goes round again until `wait` has passed, then returns the last result.
  // A lone address that cannot be reached is reported at once unless a standby answered
  // (nothing then says another server will) or `lone_waits` says it stands for several
  // (a Kubernetes Service, a virtual IP that moves to the new leader) and no connection
  // could be made there (a TLS failure is reported at once). `resend` false: a
  // request that may have reached a server is returned as it failed, not sent again.
  HttpResponse Send(const HttpRequest& request, bool resend, std::chrono::milliseconds wait, bool lone_waits = false);

  // The server last sent to, and all the addresses known (given, and learnt from standbys).
  const std::string& current() const { return urls_[current_]; }
  const std::vector<std::string>& urls() const { return urls_; }

 private:
  HttpConnection& ConnectionTo(const std::string& url);
  // Makes `url` the current one, adding it to the list when it was not there.
  void MoveTo(const std::string& url);
  // Whether a standby's `leader` (answered by `from`) is followed: MayFollowLeader, and at
  // most kMaxLearned addresses not given.
  bool Followable(const std::string& leader, const std::string& from) const;
  // Addresses learnt from standbys at most: a chain of made-up leaders ends.
  static constexpr size_t kMaxLearned = 8;
  size_t learned_ = 0;

  std::vector<std::string> urls_;
  size_t current_ = 0;
  HttpConnector connect_;
  // One open connection, to the address asked last: one kept open to every standby and
  // learnt address would hold a worker of each server for its keep-alive time.
  std::string connected_url_;
  std::unique_ptr<HttpConnection> connection_;
};

}  // namespace gantry
