// The port proxy's tests' tools: a job that serves tests/server/port_app.py on its port
// `web`, and raw HTTP to the proxy (requests exactly as written, answers exactly as sent).
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "core/byte_stream.h"
#include "net/http_exchange.h"
#include "net/stream_upgrade.h"
#include "server_process.h"

namespace gantry::testing {

// The app copied where any job's account reads it (a job runs as its team's account).
inline std::string PortAppScript() {
  std::string path = "/tmp/gantry-port-app-" + std::to_string(getpid()) + ".py";
  std::filesystem::copy_file(GANTRY_SOURCE_DIR "/tests/server/port_app.py", path,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                         std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  return path;
}

struct RawAnswer {
  int status = 0;
  std::string head, body;
  bool HasHeader(const std::string& line) const { return head.find("\r\n" + line + "\r\n") != std::string::npos; }
};

// Sends `request` (whole: line, headers, blank line, body) to `url`'s host and port and reads
// the answer until the connection closes (the proxy closes after each answer).
inline RawAnswer RawHttp(const std::string& url, const std::string& request, int timeout_ms = 20000) {
  RawAnswer answer;
  auto address = SplitServerAddress(url);
  if (!address) return answer;
  HttpConnectionOptions options;
  auto fd = ConnectTcp(*address, options);
  if (!fd) return answer;
  FdStream s(*fd);
  if (!s.WriteAll(request, timeout_ms)) return answer;
  std::string all;
  char buf[65536];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!WaitReadable(s, 200)) continue;
    ssize_t n = s.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  size_t end = all.find("\r\n\r\n");
  answer.head = all.substr(0, end == std::string::npos ? all.size() : end + 2);
  answer.body = end == std::string::npos ? "" : all.substr(end + 4);
  if (answer.head.size() > 12) answer.status = std::atoi(answer.head.c_str() + 9);
  return answer;
}

// "GET PATH" with these extra header lines (each ending in \r\n) to the proxy at `url`, on a
// connection that closes after the answer.
inline RawAnswer ProxyGet(const std::string& url, const std::string& path, const std::string& headers = "") {
  auto address = SplitServerAddress(url);
  return RawHttp(url, "GET " + path + " HTTP/1.1\r\nHost: " + (address ? HostAndPort(*address) : "") +
                          "\r\nConnection: close\r\n" + headers + "\r\n");
}

// A masked WebSocket text frame (a client's).
inline std::string WebSocketFrame(const std::string& text) {
  std::string f;
  f += static_cast<char>(0x81);
  f += static_cast<char>(0x80 | text.size());  // short texts only
  const char mask[4] = {0x11, 0x22, 0x33, 0x44};
  f.append(mask, 4);
  for (size_t i = 0; i < text.size(); ++i) f += static_cast<char>(text[i] ^ mask[i % 4]);
  return f;
}

// A job of `token`'s user serving port_app.py on its port `web`, answering through the proxy.
struct PortJob {
  std::string id, proxy_url, ports_url, path;
};

inline PortJob StartPortApp(ServerProcess& server, const char* token) {
  PortJob job;
  auto c = server.Client(token);
  nlohmann::json spec = {{"gpus", 1}, {"ports", {"web"}}, {"command", "exec python3 " + PortAppScript()}};
  job.id = Json(c.Post("/v1/jobs", spec.dump(), "application/json")).value("id", "");
  for (int i = 0; i < 1000 && job.proxy_url.empty(); ++i) {
    nlohmann::json j = Json(c.Get("/v1/jobs/" + job.id));
    for (const auto& p : j.value("ports", nlohmann::json::array())) {
      if (p.value("name", "") == "web") job.proxy_url = p.value("proxy_url", "");
    }
    if (job.proxy_url.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  job.path = "/jobs/" + job.id + "/ports/web/";
  job.ports_url = job.proxy_url.substr(0, job.proxy_url.size() - job.path.size());
  for (int i = 0; i < 150; ++i) {  // until the app listens
    if (ProxyGet(job.ports_url, job.path + "ready", std::string("Authorization: Bearer ") + token + "\r\n").status ==
        200) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return job;
}

}  // namespace gantry::testing
