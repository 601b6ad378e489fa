// Leader election for servers that share one PostgreSQL store: a single `leader` row holds
// the current term, the holder and its URL, and an expiry set by the database's clock (so
// the servers' clocks never matter). A server leads while it holds the row's term; it
// renews the expiry well within the lease, and a standby takes the row, with the next
// term, only once the expiry has passed. Fencing: every commit of the leader first calls
// gantry_fence(term), which takes a share lock on the row and fails unless the term is
// still the row's, so a deposed leader's late commit is rejected by the database itself,
// and a take-over waits for a commit already in flight (docs/DESIGN.md, "Leadership").
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct LeaseView {
  bool mine = false;       // this server leads (term is its term)
  int64_t term = 0;        // the row's term
  std::string leader_url;  // the leader's URL ("" before anyone led)
  bool live = false;       // the row's lease has not expired
  int64_t takeovers = 0;   // times the row passed from one holder to another
};

class LeaderLease {
 public:
  // `me` names this server in the row: the same name across restarts of one server (its
  // data directory's), so a server restarted after a crash takes its row back at once with
  // the next term instead of waiting out its own dead lease (its earlier process, were it
  // still alive, is fenced by the new term). `url` is where clients reach it. The lease is
  // how long a leader that stopped renewing keeps the row.
  static Expected<std::unique_ptr<LeaderLease>> Open(const std::string& db_url, std::string me, std::string url,
                                                     DurationMs lease);
  ~LeaderLease();

  // One attempt: takes the row with a new term if its lease expired or its holder is this
  // server's earlier process, renews it if this process holds it, else reports who leads.
  Expected<LeaseView> Campaign();
  // Extends this server's term. False: another server took the row (this one is deposed).
  Expected<bool> Renew();
  // Where clients reach this server, once it is known (a server on port 0 learns it late).
  Status SetUrl(std::string url);
  // Gives the row up at a clean stop (its writes done): a standby takes over at its next
  // campaign instead of waiting out the lease. Only this term's row is touched.
  Status Release();

  int64_t term() const { return term_; }
  int64_t takeovers() const { return takeovers_; }  // as the last campaign saw it
  DurationMs lease() const { return lease_ms_; }

 private:
  LeaderLease() = default;
  std::string db_url_;
  std::string me_;
  std::string url_;
  DurationMs lease_ms_ = 0;
  int64_t term_ = 0;  // this server's term, 0 while it does not lead
  int64_t takeovers_ = 0;
  std::mutex mu_;
  struct Connection;  // a pqxx::connection (libpqxx stays out of this header)
  std::unique_ptr<Connection> conn_;
  // The connection, opened again if it was lost (under mu_).
  Connection& Connected();
};

}  // namespace gantry
