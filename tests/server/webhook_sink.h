// A loopback HTTP receiver for webhooks (alerts, job notifications), and a poll helper for
// what the Notifier sends from its own thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace gantry::testing {

// Polls `done` for up to 5 s.
inline bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

struct WebhookSink {
  WebhookSink() {
    server.Post("/hook", [this](const httplib::Request& req, httplib::Response&) {
      std::lock_guard<std::mutex> lock(mu);
      received.push_back(nlohmann::json::parse(req.body));
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~WebhookSink() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/hook"; }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard<std::mutex> lock(mu);
    return received;
  }
  std::vector<std::string> kinds() {
    std::vector<std::string> out;
    for (const auto& b : bodies()) out.push_back(b.value("kind", ""));
    return out;
  }
  httplib::Server server;
  int port = 0;
  std::thread thread;
  std::mutex mu;
  std::vector<nlohmann::json> received;
};

}  // namespace gantry::testing
