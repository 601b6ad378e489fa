// A server on a shared PostgreSQL store leads or stands by (server/leader_lease.h). Standby:
// it answers every request on its address with 503 "not the leader, leader is URL" and
// campaigns until the leader's lease runs out. Leader: a keeper renews the lease and ends
// the process the moment the term is lost, before it could write anything more.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "server/leader_lease.h"

namespace gantry {

struct StandbyOptions {
  std::string db;    // the PostgreSQL URL
  std::string host;  // where to answer while standing by (the server's --listen)
  int port = 0;      // 0: any free port, which the leader then listens on too
  std::string my_url;
  std::string me;  // this server's name in the leader row, kept across its restarts
  DurationMs lease_ms = 8000;
  std::string tls_cert, tls_key;  // the standby answers over TLS when the server does
  std::string tls_ciphers;        // with the server's TLS 1.2 suites
};

// Blocks until this server leads, or a stop signal (then returns null with `*stopped`).
// `*port` is the port it answered on (the same one the server must bind next).
Expected<std::unique_ptr<LeaderLease>> AwaitLeadership(const StandbyOptions& o, const sigset_t& stop_signals, int* port,
                                                       bool* stopped, std::ostream& out);

// Renews the lease every lease/4. When another server holds the term, or no renewal has
// succeeded for a whole lease (this server may be cut off), it logs and ends the process
// with exit code 3: the new leader owns the store, and memory here may be stale. A
// watchdog apart from the renewals keeps that promise when a renewal hangs (a connection
// to PostgreSQL cut off without a reset waits as long as TCP lets it).
class LeaseKeeper {
 public:
  LeaseKeeper(LeaderLease& lease, std::ostream& err);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  // Waits `d`; true once the keeper is stopping.
  bool Sleep(std::chrono::milliseconds d);
  [[noreturn]] void StepDown(const std::string& why);

  LeaderLease& lease_;
  std::ostream& err_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string last_error_;                // the last failed renewal's
  std::atomic<Clock::rep> last_renewed_;  // when the last good renewal was sent
  std::thread renewer_;
  std::thread watchdog_;
};

}  // namespace gantry
