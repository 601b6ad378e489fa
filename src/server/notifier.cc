// Webhook delivery with cpp-httplib.
#include "server/notifier.h"

#include <httplib.h>

#include "server/job_record.h"

namespace gantry {

namespace {

constexpr size_t kMaxQueued = 1000;

bool Send(const std::string& url, const std::string& body) {
  size_t scheme = url.find("://");
  size_t path_at = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  std::string origin = path_at == std::string::npos ? url : url.substr(0, path_at);
  std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  client.set_connection_timeout(3);
  client.set_read_timeout(5);
  client.set_write_timeout(5);
  auto res = client.Post(path, body, "application/json");
  return res && res->status >= 200 && res->status < 300;
}

}  // namespace

Notifier::Notifier() : thread_([this] { Loop(); }) {}

Notifier::~Notifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Notifier::Post(const std::string& url, nlohmann::json body) {
  if (url.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      queue_.pop_front();
      failed_++;
    }
    queue_.emplace_back(url, std::move(body));
  }
  cv_.notify_one();
}

uint64_t Notifier::sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

uint64_t Notifier::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void Notifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left to send
    auto [url, body] = std::move(queue_.front());
    queue_.pop_front();
    bool stopping = stop_;
    lock.unlock();
    std::string text = body.dump(-1, ' ', false, kReplaceBadUtf8);
    bool ok = false;
    for (int attempt = 0; attempt < (stopping ? 1 : 3) && !ok; ++attempt) ok = Send(url, text);
    lock.lock();
    (ok ? sent_ : failed_)++;
  }
}

}  // namespace gantry
