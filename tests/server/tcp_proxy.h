// A TCP proxy on loopback that a test controls, for network partitions: it forwards
// connections to a target port, and Freeze() stops it passing bytes either way while the
// connections stay open (a cut-off link that sends no reset, as a pulled cable or a
// firewall dropping packets looks), until Thaw().
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace gantry::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port) : target_port_(target_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listener_, 64);
    socklen_t len = sizeof(a);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~TcpProxy() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : pumps_) t.join();
  }
  int port() const { return port_; }
  void Freeze() { frozen_ = true; }
  void Thaw() { frozen_ = false; }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  void Accept() {
    for (;;) {
      int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in to = Loopback(target_port_);
      if (connect(server, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
        close(client);
        close(server);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }
  // Both directions of one connection, until either side closes (or the proxy stops).
  void Pump(int client, int server) {
    char buf[16384];
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    while (!stop_) {
      if (frozen_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (poll(fds, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!fds[i].revents) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        closed = n <= 0 || !WriteAll(fds[1 - i].fd, buf, static_cast<size_t>(n));
      }
      if (closed) break;
    }
    close(client);
    close(server);
  }
  static bool WriteAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  const int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::mutex mu_;
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

}  // namespace gantry::testing
