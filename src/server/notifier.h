// Sends alert webhooks (budgets, job cost limits, idle jobs) from its own thread, so the
// controller never waits on someone else's HTTP server. A bounded queue: when a receiver
// is down for long, the oldest alerts are dropped (they are also in the log and the API).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace gantry {

class Notifier {
 public:
  Notifier();
  ~Notifier();
  // POSTs `body` as JSON to `url` (http:// or https://), retrying a failed send twice.
  void Post(const std::string& url, nlohmann::json body);
  uint64_t sent() const;
  uint64_t failed() const;

 private:
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, nlohmann::json>> queue_;
  bool stop_ = false;
  uint64_t sent_ = 0, failed_ = 0;
  std::thread thread_;
};

}  // namespace gantry
