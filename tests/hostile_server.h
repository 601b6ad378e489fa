// A hostile HTTP server for tests of the client transports: raw bytes on loopback, over
// TCP or TLS, answering whatever a test wants a server never to answer.
#pragma once

#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "loopback.h"
#include "test_certificates.h"

namespace gantry::testing {

// A raw TCP server on loopback (or TLS over it: `tls`, with the shared test certificate):
// reads one request per connection, then writes `answer` (`later` on the connections after
// the first, when given; a NUL in it splits it into separate writes) and then, by `after`: closes, drips one more byte
// every 50 ms until the client goes away, holds the connection open, or sends `later` again and again as fast as it can
// until the client goes away.
enum class After { kClose, kDrip, kHold, kFlood };
class HostileServer {
 public:
  HostileServer(bool tls, std::string answer, After after, std::string later = "")
      : answer_(std::move(answer)), later_(std::move(later)), after_(after), tls_(tls) {
    signal(SIGPIPE, SIG_IGN);  // SSL_write to a client that went away
    if (tls_) {
      context_ = SSL_CTX_new(TLS_server_method());
      const std::string& dir = SharedTestCertificates();
      SSL_CTX_use_certificate_file(context_, (dir + "/server.pem").c_str(), SSL_FILETYPE_PEM);
      SSL_CTX_use_PrivateKey_file(context_, (dir + "/server.key").c_str(), SSL_FILETYPE_PEM);
    }
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        SSL* tls = nullptr;
        if (tls_) {
          tls = SSL_new(context_);
          SSL_set_fd(tls, c);
          if (SSL_accept(tls) != 1) {
            SSL_free(tls);
            close(c);
            continue;
          }
        }
        auto write = [c, tls](const std::string& data) {
          return tls ? SSL_write(tls, data.data(), static_cast<int>(data.size())) > 0
                     : send(c, data.data(), data.size(), MSG_NOSIGNAL) > 0;
        };
        const bool again = after_ != After::kFlood && connections_++ > 0 && !later_.empty();
        const std::string& answer = again ? later_ : answer_;
        char buf[4096];
        if ((tls ? SSL_read(tls, buf, sizeof(buf)) : read(c, buf, sizeof(buf))) > 0) {
          ++requests_;
          // A NUL splits the answer into writes of their own (over TLS: records of their own).
          for (size_t start = 0, end; start < answer.size(); start = end + 1) {
            end = std::min(answer.find('\0', start), answer.size());
            if (end > start) write(answer.substr(start, end - start));
          }
        }
        while (after_ == After::kFlood && !stop_ && write(later_)) {
        }
        while (after_ == After::kDrip && !stop_ && write("x")) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (after_ == After::kHold) {  // served on another thread, so the next client is not kept waiting
          held_.emplace_back([this, c, tls] {
            while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (tls) SSL_free(tls);
            close(c);
          });
          continue;
        }
        if (tls) SSL_free(tls);
        close(c);
      }
    });
  }
  ~HostileServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (std::thread& t : held_) t.join();
    if (context_) SSL_CTX_free(context_);
  }
  int requests() const { return requests_; }
  std::string url() const { return (tls_ ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port_); }

 private:
  std::string answer_;
  std::string later_;
  After after_;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  int fd_ = -1;
  int port_ = 0;
  bool tls_;
  SSL_CTX* context_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> held_;  // the accept thread's alone until it is joined
};

}  // namespace gantry::testing
