// Connections to a job's named port: who listens on it (from /proc/net/tcp and tcp6), the
// connection to it on the node's loopback, and the relay.
#include "agent/port_session.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "net/stream_upgrade.h"

namespace gantry {

namespace {

constexpr int kWriteTimeoutMs = 30000;
constexpr char kListenState[] = "0A";  // TCP_LISTEN in /proc/net/tcp's `st` column

}  // namespace

std::vector<uid_t> ListenerUids(const std::string& proc_net, int port) {
  std::vector<uid_t> uids;
  for (const char* file : {"/tcp", "/tcp6"}) {
    std::ifstream in(proc_net + file);
    std::string line;
    std::getline(in, line);  // the column titles
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string slot, local, remote, state, queues, timer, retransmits;
      unsigned long uid = 0;
      if (!(words >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) continue;
      size_t colon = local.rfind(':');
      if (state != kListenState || colon == std::string::npos) continue;
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) != port) continue;
      uids.push_back(static_cast<uid_t>(uid));
    }
  }
  return uids;
}

Status CheckPortListener(const std::string& proc_net, int port, uid_t uid) {
  std::vector<uid_t> uids = ListenerUids(proc_net, port);
  if (uids.empty()) {
    return Status(StatusCode::kUnavailable, fmt::format("nothing listens on port {} yet", port));
  }
  for (uid_t u : uids) {
    if (u != uid) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("port {} is listened on by uid {}, not by the job's account (uid {})", port, u, uid));
    }
  }
  return Status::Ok();
}

void RefusePortSession(ByteStream& stream, int status, const std::string& why) {
  const char* reason = status == 403 ? "Forbidden" : status == 404 ? "Not Found" : "Bad Gateway";
  std::string body = "gantry: " + why + "\n";
  stream.WriteAll(fmt::format("HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
                              "{}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{}",
                              status, reason, body.size(), body),
                  kWriteTimeoutMs);
}

void RunPortSession(int port, const std::string& port_name, ByteStream& stream, const std::atomic<bool>& stop) {
  HttpConnectionOptions options;
  options.connect_timeout = std::chrono::seconds(5);
  Expected<int> fd = ConnectTcp({"http", "127.0.0.1", port, ""}, options);
  if (!fd) fd = ConnectTcp({"http", "::1", port, ""}, options);
  if (!fd) {
    return RefusePortSession(stream, 502,
                             fmt::format("the job's port '{}' (port {} on its node) does not answer: {}", port_name,
                                         port, fd.status().message()));
  }
  FdStream upstream(*fd);
  Relay(stream, upstream, kWriteTimeoutMs, 0, &stop);
}

}  // namespace gantry
