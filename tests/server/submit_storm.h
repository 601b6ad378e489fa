// Client threads that submit jobs as fast as they can (or with a pause between jobs), each
// job under its own idempotency key, retried with the same key until a server acknowledges
// it: the server may be down, restarting, or changing hands. Given the addresses of a
// leader and its standbys, the clients follow the leader by themselves (LeaderFollower, as
// the agent and the CLI do). For the kill -9 tests.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net/leader_follower.h"
#include "net/plain_http_connection.h"

namespace gantry::testing {

class SubmitStorm {
 public:
  // `threads` clients submit 1-GPU jobs named by their keys, holding their GPUs for a day,
  // to the server of `addresses` that leads (changed with SetAddress), with `pause`
  // between acknowledged jobs.
  SubmitStorm(int threads, std::vector<std::string> addresses, std::string token,
              std::chrono::milliseconds pause = std::chrono::milliseconds(0))
      : addresses_(std::move(addresses)), token_(std::move(token)) {
    for (int t = 0; t < threads; ++t) {
      clients_.emplace_back([this, t, pause] {
        for (int n = 0; !stop_; ++n) {
          Submit("c" + std::to_string(t) + "-" + std::to_string(n));
          if (pause.count() > 0) std::this_thread::sleep_for(pause);
        }
      });
    }
  }
  SubmitStorm(int threads, std::string address, std::string token,
              std::chrono::milliseconds pause = std::chrono::milliseconds(0))
      : SubmitStorm(threads, std::vector<std::string>{std::move(address)}, std::move(token), pause) {}
  ~SubmitStorm() { Stop(); }

  void SetAddress(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    addresses_ = {address};
  }
  // Stops the clients and waits for them.
  void Stop() {
    stop_ = true;
    for (auto& c : clients_) {
      if (c.joinable()) c.join();
    }
  }
  // The keys (= job names) a server acknowledged; after Stop.
  const std::set<std::string>& acknowledged() const { return acknowledged_; }
  // Submits a server refused for good (4xx): there should be none.
  int refused() const { return refused_; }

 private:
  void Submit(const std::string& key) {
    const std::string body = R"({"gpus": 1, "name": ")" + key + R"(", "hold_gpus": "1d"})";
    while (!stop_) {
      std::vector<std::string> at;
      {
        std::lock_guard<std::mutex> lock(mu_);
        at = addresses_;
      }
      HttpConnectionOptions options;
      options.connect_timeout = std::chrono::milliseconds(200);
      LeaderFollower servers(at, [options](const std::string& url) { return ConnectPlainHttp(url, options); });
      HttpRequest post{"POST",
                       "/v1/jobs",
                       {{"Idempotency-Key", key}, {"Authorization", "Bearer " + token_}},
                       body,
                       "application/json"};
      auto r = servers.Send(post, true, std::chrono::milliseconds(0));
      if (r && (r.status == 201 || r.status == 200)) {
        std::lock_guard<std::mutex> lock(mu_);
        acknowledged_.insert(key);
        return;
      }
      if (r && r.status < 500) {
        refused_++;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::mutex mu_;
  std::vector<std::string> addresses_;
  const std::string token_;
  std::set<std::string> acknowledged_;
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::vector<std::thread> clients_;
};

}  // namespace gantry::testing
