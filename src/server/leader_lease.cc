// LeaderLease: the leader row's campaign, renewal and URL, each in one short transaction
// on a connection of its own (so a long commit never delays a renewal).
#include "server/leader_lease.h"

#include <fmt/format.h>

#include <pqxx/pqxx>

namespace gantry {

namespace {

std::string FirstLine(const std::string& what) { return what.substr(0, what.find('\n')); }

}  // namespace

struct LeaderLease::Connection {
  explicit Connection(const std::string& url) : c(url) {}
  pqxx::connection c;
};

LeaderLease::~LeaderLease() = default;

LeaderLease::Connection& LeaderLease::Connected() {
  if (!conn_->c.is_open()) conn_ = std::make_unique<Connection>(db_url_);
  return *conn_;
}

Expected<std::unique_ptr<LeaderLease>> LeaderLease::Open(const std::string& db_url, std::string me, std::string url,
                                                         DurationMs lease) {
  if (lease < 1000) return Status::Invalid("--leader-lease", "must be at least 1s");
  if (me.empty()) return Status::Invalid("leader", "a server needs a name in the leader row");
  std::unique_ptr<LeaderLease> l(new LeaderLease());
  l->db_url_ = db_url;
  l->me_ = std::move(me);
  l->url_ = std::move(url);
  l->lease_ms_ = lease;
  try {
    l->conn_ = std::make_unique<Connection>(db_url);
  } catch (const std::exception& e) {
    return Status::Invalid("db", "leader election: " + FirstLine(e.what()));
  }
  return l;
}

Expected<LeaseView> LeaderLease::Campaign() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    pqxx::work tx(Connected().c);
    // The row exists from the migration; lock it, so two standbys never both take it.
    pqxx::row r =
        tx.exec1("SELECT term, holder, url, expires_at > now(), takeovers FROM leader WHERE id = 1 FOR UPDATE");
    LeaseView v{.term = r[0].as<int64_t>(),
                .leader_url = r[2].as<std::string>(),
                .live = r[3].as<bool>(),
                .takeovers = r[4].as<int64_t>()};
    const std::string holder = r[1].as<std::string>();
    const std::string lease = fmt::format("{} milliseconds", lease_ms_);
    if (holder == me_ && v.term == term_ && term_ > 0) {
      tx.exec_params("UPDATE leader SET expires_at = now() + $1::interval, url = $2 WHERE id = 1", lease, url_);
      v.mine = v.live = true;
    } else if (!v.live || holder == me_) {  // free, or this server's own earlier process
      // From another server (not the first leader, not this server's own restart): a take-over.
      pqxx::row t = tx.exec_params1(
          "UPDATE leader SET term = term + 1, holder = $1, url = $2, expires_at = now() + $3::interval, "
          "takeovers = takeovers + CASE WHEN holder IN ('', $1) THEN 0 ELSE 1 END WHERE id = 1 RETURNING term, "
          "takeovers",
          me_, url_, lease);
      term_ = v.term = t[0].as<int64_t>();
      v.takeovers = t[1].as<int64_t>();
      v.leader_url = url_;
      v.mine = v.live = true;
    }
    tx.commit();
    takeovers_ = v.takeovers;
    return v;
  } catch (const std::exception& e) {
    return Status::Internal("leader election: " + FirstLine(e.what()));
  }
}

Expected<bool> LeaderLease::Renew() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    pqxx::work tx(Connected().c);
    // By term, not by expiry: a leader that was paused past its lease, with no one taking
    // over meanwhile, still holds the only term there is and may go on.
    pqxx::result r =
        tx.exec_params("UPDATE leader SET expires_at = now() + $1::interval WHERE id = 1 AND holder = $2 AND term = $3",
                       fmt::format("{} milliseconds", lease_ms_), me_, term_);
    tx.commit();
    return r.affected_rows() == 1;
  } catch (const std::exception& e) {
    return Status::Internal("lease renewal: " + FirstLine(e.what()));
  }
}

Status LeaderLease::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    pqxx::work tx(Connected().c);
    tx.exec_params(
        "UPDATE leader SET expires_at = now() - interval '1 second' WHERE id = 1 AND holder = $1 AND term = $2", me_,
        term_);
    tx.commit();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Internal("lease release: " + FirstLine(e.what()));
  }
}

Status LeaderLease::SetUrl(std::string url) {
  std::lock_guard<std::mutex> lock(mu_);
  url_ = std::move(url);
  try {
    pqxx::work tx(Connected().c);
    tx.exec_params("UPDATE leader SET url = $1 WHERE id = 1 AND holder = $2 AND term = $3", url_, me_, term_);
    tx.commit();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Internal("leader url: " + FirstLine(e.what()));
  }
}

}  // namespace gantry
