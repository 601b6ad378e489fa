// Connections to a job's named port: whether the job's account listens on it, the
// connection to it on the node's loopback, and the relay.
#include "agent/port_session.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>

#include "core/encoding.h"
#include "core/local_listener.h"
#include "net/stream_upgrade.h"

namespace gantry {

namespace {

constexpr int kWriteTimeoutMs = 30000;

}  // namespace

Status CheckPortListener(const std::string& proc_net, int port, uid_t uid) {
  std::vector<uid_t> uids = LoopbackListenerUids(port, proc_net);
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

namespace {

// This node's key for port tokens, read (or made: 0600) once per state directory.
std::string NodeKey(const std::string& state_dir) {
  static std::mutex mu;
  static std::map<std::string, std::string> keys;
  std::lock_guard<std::mutex> lock(mu);
  std::string& key = keys[state_dir];
  if (!key.empty()) return key;
  const std::string path = state_dir + "/port-token.key";
  if (std::ifstream in(path); in) std::getline(in, key);
  if (key.size() < 32) {
    key = NewToken();
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      bool wrote = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
      ::close(fd);
      // Another agent process may have made one first: theirs wins, and is read back.
      if (wrote && ::link(tmp.c_str(), path.c_str()) != 0) {
        if (std::ifstream in(path); in) std::getline(in, key);
      }
      ::unlink(tmp.c_str());
    }
  }
  return key;
}

}  // namespace

std::string PortToken(const std::string& state_dir, const std::string& job_id, int run) {
  const std::string key = NodeKey(state_dir);
  const std::string what = fmt::format("port-token:{}:{}", job_id, run);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(what.data()),
       what.size(), mac, &size);
  std::string hex;
  for (unsigned int i = 0; i < size && i < 20; ++i) hex += fmt::format("{:02x}", mac[i]);
  return hex;
}

void RunPortSession(int port, const std::string& port_name, const std::string& token, ByteStream& stream,
                    const std::atomic<bool>& stop) {
  // The request's head, as the server rewrote it: the run's token goes in after its first line.
  std::string head, rest;
  if (!ReadHttpHead(stream, 64 * 1024, kWriteTimeoutMs, &head, &rest)) {
    return RefusePortSession(stream, 502, "the request did not arrive whole");
  }
  size_t line_end = head.find("\r\n") + 2;
  head.insert(line_end, fmt::format("Authorization: token {}\r\nX-Gantry-Port-Token: {}\r\n", token, token));
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
  if (!upstream.WriteAll(head + rest, kWriteTimeoutMs)) return;
  Relay(stream, upstream, kWriteTimeoutMs, 0, &stop);
}

}  // namespace gantry
