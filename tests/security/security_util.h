// Helpers for the security suite: raw TCP clients that send exactly the bytes an attacker
// would (half requests, chunked bodies, idle sockets), and waits on a real server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "command_util.h"
#include "server/controller_harness.h"
#include "server/server_process.h"
#include "test_certificates.h"

namespace gantry::testing {

// Host and port of an http://host:port address.
inline std::pair<std::string, int> HostPort(const std::string& address) {
  std::string rest = address.substr(address.find("://") + 3);
  size_t colon = rest.rfind(':');
  return {rest.substr(0, colon), std::stoi(rest.substr(colon + 1))};
}

// A TCP connection to the server from `from` (any 127.x.y.z address), or -1.
inline int Connect(const std::string& address, const std::string& from = "") {
  auto [host, port] = HostPort(address);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (!from.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &local.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// What the server sends until it closes, a full answer arrives or `seconds` pass.
inline std::string ReadAnswer(int fd, double seconds) {
  std::string out;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[65536];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    size_t head = out.find("\r\n\r\n");
    size_t len = out.find("Content-Length: ");
    if (head != std::string::npos && len != std::string::npos && len < head) {
      size_t body = std::stoul(out.substr(len + 16));
      if (out.size() >= head + 4 + body) break;
    }
  }
  return out;
}

// True when the server closed the connection within `seconds` (reads return 0).
inline bool ClosedByServer(int fd, double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// Raises this process's open-file limit to its hard limit (thousands of test sockets).
inline void RaiseFileLimit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
}

// Polls `f` until it returns `want` (or ~15 s pass); returns the last value.
template <typename F>
std::string WaitUntil(F f, const std::string& want) {
  std::string seen;
  for (int i = 0; i < 750 && (seen = f()) != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return seen;
}

inline std::string JobField(httplib::Client& c, const std::string& id, const char* field) {
  return Json(c.Get("/v1/jobs/" + id)).value(field, "");
}

// Whether this process may switch users (the job-identity tests need a root agent).
inline bool IsRoot() { return geteuid() == 0; }

}  // namespace gantry::testing
