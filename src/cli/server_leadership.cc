// AwaitLeadership (the standby's answer and campaign loop) and LeaseKeeper (renewal, and
// the process's end when the term is lost).
#include "cli/server_leadership.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "server/http_front.h"
#include "state/metrics.h"

namespace gantry {

namespace {

// Answers everything with 503 and the leader's URL while this server stands by.
class StandbyResponder {
 public:
  StandbyResponder(const StandbyOptions& o) {
    if (!o.tls_cert.empty()) {
      auto tls = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
      RestrictTls(tls->ssl_context(), o.tls_ciphers);  // the server checked the list at its start
      server_ = std::move(tls);
    } else {
      server_ = std::make_unique<httplib::Server>();
    }
    server_->set_socket_options(ListenSocketOptions);  // a port in use is refused
    auto answer = [this](const httplib::Request&, httplib::Response& res) {
      std::string leader;
      {
        std::lock_guard<std::mutex> lock(mu_);
        leader = leader_;
      }
      nlohmann::json e = {{"code", "unavailable"},
                          {"message", leader.empty() ? "not the leader, and no leader yet: try again shortly"
                                                     : "not the leader, leader is " + leader},
                          {"leader", leader}};
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(nlohmann::json{{"error", e}}.dump(), "application/json");
    };
    // Prometheus scrapes every server: a standby says it stands by (no token: nothing here
    // is any team's).
    server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      MetricsWriter w;
      {
        std::lock_guard<std::mutex> lock(mu_);
        WriteLeadershipMetrics(w, false, term_, takeovers_);
      }
      res.set_content(std::move(w).str(), "text/plain; version=0.0.4");
    });
    // Alive and ready to answer (with the leader's URL): Kubernetes' liveness and readiness
    // probes pass, so a Deployment of a leader and a standby is Available and can roll; its
    // Service sends traffic to the leader alone through the Endpoints the leader writes
    // (kube/leader_endpoints.h). /healthz stays 503: a load balancer's check finds the leader.
    auto alive = [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      res.set_content(nlohmann::json{{"status", "standby"}, {"leader", leader_}}.dump(), "application/json");
    };
    server_->Get("/livez", alive);
    server_->Get("/readyz", alive);
    const std::string any = R"(.*)";
    server_->Get(any, answer);
    server_->Post(any, answer);
    server_->Put(any, answer);
    server_->Patch(any, answer);
    server_->Delete(any, answer);
  }
  ~StandbyResponder() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  // Binds host:port (port 0: any); the port it got, or -1.
  int Start(const std::string& host, int port) {
    int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
    if (bound < 0) return -1;
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    return bound;
  }
  void SetLeader(const std::string& url, int64_t term, int64_t takeovers) {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = url;
    term_ = term;
    takeovers_ = takeovers;
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  std::string leader_;
  int64_t term_ = 0;
  int64_t takeovers_ = 0;
};

}  // namespace

Expected<std::unique_ptr<LeaderLease>> AwaitLeadership(const StandbyOptions& o, const sigset_t& stop_signals, int* port,
                                                       bool* stopped, std::ostream& out) {
  *stopped = false;
  *port = o.port;
  auto lease = LeaderLease::Open(o.db, o.me, o.my_url, o.lease_ms);
  if (!lease) return lease.status();
  std::unique_ptr<StandbyResponder> responder;
  std::string last_leader = "?";
  // Campaign at a quarter of the lease, at most every second: a take-over comes within
  // the lease plus this after the leader's last renewal.
  const auto poll = std::chrono::milliseconds(std::min<DurationMs>(1000, o.lease_ms / 4));
  for (;;) {
    auto view = (*lease)->Campaign();
    if (view && view->mine) {
      if (responder) out << fmt::format("standby: now the leader (term {})", view->term) << std::endl;
      return std::move(*lease);
    }
    const std::string leader = view ? view->leader_url : "";
    if (!responder) {
      responder = std::make_unique<StandbyResponder>(o);
      int bound = responder->Start(o.host, o.port);
      if (bound < 0) return Status::Invalid("--listen", fmt::format("cannot listen on {}:{}", o.host, o.port));
      *port = bound;
      std::string mine = fmt::format("{}://{}:{}", o.tls_cert.empty() ? "http" : "https", o.host, bound);
      (*lease)->SetUrl(o.my_url.empty() || o.port == 0 ? mine : o.my_url).ok();
      out << "standby on " << mine << ": answering 503 with the leader's URL until it leads" << std::endl;
    }
    if (view) {
      responder->SetLeader(leader, view->term, view->takeovers);
    } else {
      responder->SetLeader(leader, 0, 0);
    }
    if (leader != last_leader) {
      out << "standby: "
          << (view ? "leader is " + (leader.empty() ? std::string("(none yet)") : leader) : view.status().ToString())
          << std::endl;
      last_leader = leader;
    }
    timespec wait{static_cast<time_t>(poll.count() / 1000), static_cast<long>(poll.count() % 1000) * 1000000};
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) {
      *stopped = true;
      return std::unique_ptr<LeaderLease>();
    }
  }
}

LeaseKeeper::LeaseKeeper(LeaderLease& lease, std::ostream& err)
    : lease_(lease), err_(err), last_renewed_(Clock::now().time_since_epoch().count()) {
  const auto every = std::chrono::milliseconds(lease_.lease() / 4);
  renewer_ = std::thread([this, every] {
    while (!Sleep(every)) {
      // Counted from when the renewal was sent: the database's expiry is no earlier.
      const auto sent = Clock::now();
      auto renewed = lease_.Renew();
      if (renewed && *renewed) {
        last_renewed_ = sent.time_since_epoch().count();
      } else if (renewed) {
        StepDown("another server took over");
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_ = renewed.status().ToString();
      }
    }
  });
  // Apart from the renewals, which may hang on a cut-off connection as long as TCP lets them.
  watchdog_ = std::thread([this, every] {
    const auto lease_time = std::chrono::milliseconds(lease_.lease());
    while (!Sleep(every / 2)) {
      if (Clock::now() - Clock::time_point(Clock::duration(last_renewed_.load())) < lease_time) continue;
      std::string why;
      {
        std::lock_guard<std::mutex> lock(mu_);
        why = last_error_.empty() ? "the store did not answer" : last_error_;
      }
      StepDown("no renewal for a whole lease (" + why + ")");
    }
  });
}

bool LeaseKeeper::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return wake_.wait_for(lock, d, [this] { return stop_; });
}

void LeaseKeeper::StepDown(const std::string& why) {
  err_ << "gantry server: lost the leadership (term " << lease_.term() << "): " << why << "; exiting" << std::endl;
  _exit(3);
}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (renewer_.joinable()) renewer_.join();
}

}  // namespace gantry
