// Upgraded connections, plain transport: TCP connect with a deadline, the request head,
// the answer's head, and a refusal's JSON error read back into words.
#include "net/stream_upgrade.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>

#include "net/beast_http_connection.h"

namespace gantry {

namespace {

std::mutex g_opener_mu;
StreamOpener g_tls_opener;

constexpr size_t kMaxAnswerHead = 64 * 1024;
constexpr size_t kMaxRefusalBody = 64 * 1024;

// The value of header `name` in an answer head, "" when absent.
std::string HeadValue(const std::string& head, const std::string& name) {
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos + 2 < head.size()) {
    size_t end = head.find("\r\n", pos + 2);
    if (end == std::string::npos) break;
    std::string line = head.substr(pos + 2, end - pos - 2);
    size_t colon = line.find(':');
    if (colon != std::string::npos && colon == name.size() && strncasecmp(line.data(), name.data(), name.size()) == 0) {
      size_t v = line.find_first_not_of(" \t", colon + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
    pos = end;
  }
  return "";
}

}  // namespace

void SetTlsStreamOpener(StreamOpener opener) {
  std::lock_guard<std::mutex> lock(g_opener_mu);
  g_tls_opener = std::move(opener);
}

Expected<int> ConnectTcp(const ServerAddress& address, const HttpConnectionOptions& options) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
  if (rc != 0)
    return Status(StatusCode::kUnavailable, fmt::format("cannot resolve {}: {}", address.host, gai_strerror(rc)));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (::poll(&p, 1, static_cast<int>(options.connect_timeout.count())) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      why = err ? std::strerror(err) : "timed out";
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    return Status(StatusCode::kUnavailable, fmt::format("cannot connect to {}: {}", HostAndPort(address), why));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  return fd;
}

Expected<std::unique_ptr<ByteStream>> FinishUpgrade(std::unique_ptr<ByteStream> stream, const ServerAddress& address,
                                                    const HttpRequest& request, const HttpConnectionOptions& options,
                                                    UpgradeRefusal* refusal) {
  if (Status s = CheckHeaders(request); !s.ok()) return s;
  std::string head =
      fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: gantry-stream\r\n", request.method,
                  beast_http::EncodeTarget(address.prefix + request.path), HostAndPort(address));
  for (const auto& [name, value] : request.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  const int timeout_ms = static_cast<int>(options.read_timeout.count());
  if (!stream->WriteAll(head, timeout_ms)) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("the connection to {} broke while asking", HostAndPort(address)));
  }
  std::string answer, rest;
  if (!ReadHttpHead(*stream, kMaxAnswerHead, timeout_ms, &answer, &rest)) {
    return Status(StatusCode::kUnavailable, fmt::format("no answer from {}", HostAndPort(address)));
  }
  int status = 0;
  if (answer.size() > 12 && answer.compare(0, 5, "HTTP/") == 0) {
    std::from_chars(answer.data() + 9, answer.data() + 12, status);
  }
  if (status == 101) {
    stream->Unread(std::move(rest));
    return stream;
  }
  // A refusal: its body (Content-Length, or until the server closes) holds the error.
  size_t length = kMaxRefusalBody;
  std::string cl = HeadValue(answer, "Content-Length");
  if (!cl.empty()) std::from_chars(cl.data(), cl.data() + cl.size(), length);
  length = std::min(length, kMaxRefusalBody);
  char buf[4096];
  while (rest.size() < length && WaitReadable(*stream, timeout_ms)) {
    ssize_t n = stream->ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) break;
    rest.append(buf, static_cast<size_t>(n));
  }
  rest.resize(std::min(rest.size(), length));
  nlohmann::json body = ParseAnswerJson(rest);
  std::string message, field;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& e = body["error"];
    if (e.contains("message") && e["message"].is_string()) message = e["message"].get<std::string>();
    if (e.contains("field") && e["field"].is_string()) field = e["field"].get<std::string>();
  }
  if (message.empty()) message = fmt::format("the server answered {}", status);
  if (refusal) *refusal = {status, field.empty() ? message : field + ": " + message};
  return Status(status == 404   ? StatusCode::kNotFound
                : status == 403 ? StatusCode::kPermissionDenied
                : status == 401 ? StatusCode::kUnauthenticated
                : status == 409 ? StatusCode::kFailedPrecondition
                : status == 429 ? StatusCode::kOverLimit
                : status >= 500 ? StatusCode::kUnavailable
                                : StatusCode::kInvalidArgument,
                message, field);
}

Expected<std::unique_ptr<ByteStream>> OpenUpgradedStream(const std::string& url, const HttpRequest& request,
                                                         const HttpConnectionOptions& options,
                                                         UpgradeRefusal* refusal) {
  auto address = SplitServerAddress(url);
  if (!address) return address.status();
  if (address->scheme == "https") {
    StreamOpener tls;
    {
      std::lock_guard<std::mutex> lock(g_opener_mu);
      tls = g_tls_opener;
    }
    if (!tls) return Status(StatusCode::kUnavailable, fmt::format("{}: this program does not speak TLS", url));
    return tls(url, request, options, refusal);
  }
  auto fd = ConnectTcp(*address, options);
  if (!fd) return fd.status();
  return FinishUpgrade(std::make_unique<FdStream>(*fd), *address, request, options, refusal);
}

}  // namespace gantry
