// Sends webhooks (alerts: budgets, job cost limits, idle jobs; job notifications) and mail
// from its own thread, so the controller never waits on someone else's server. A bounded
// queue: when a receiver is down for long, the oldest messages are dropped (alerts are also
// in the log and the API, job events in the job's events).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace gantry {

class Notifier {
 public:
  // `sendmail`: the program mail goes through (`sendmail -t -oi`, the message on stdin).
  explicit Notifier(std::string sendmail = "/usr/sbin/sendmail");
  ~Notifier();  // Stop()
  // How a message went: delivered, or why not (called on the notifier's thread).
  using Done = std::function<void(bool delivered, const std::string& why)>;
  // POSTs `body` as JSON to `url` (http:// or https://), retrying a failed send twice.
  void Post(const std::string& url, nlohmann::json body, Done done = nullptr);
  // Mails `body` to `to` (a checked plain address), retrying a failed send twice.
  void Mail(const std::string& to, const std::string& subject, const std::string& body, Done done = nullptr);
  // Sends what is queued (one try each) and stops; later messages are dropped.
  void Stop();
  uint64_t sent() const;
  uint64_t failed() const;
  uint64_t mails_sent() const;
  uint64_t mails_failed() const;

 private:
  struct Message {
    std::string url;  // a webhook; empty: mail
    nlohmann::json body;
    std::string to, subject, text;
    Done done;
  };
  void Enqueue(Message m);
  // Why the message did not go; "" when it went.
  std::string Deliver(const Message& m) const;
  void Loop();

  std::string sendmail_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  bool stop_ = false;
  uint64_t sent_ = 0, failed_ = 0, mails_sent_ = 0, mails_failed_ = 0;
  std::thread thread_;
};

}  // namespace gantry
