// What both transports share: header names without case, the failures in words, and a
// server address split into its parts.
#include "net/http_exchange.h"

#include <fmt/format.h>
#include <strings.h>

#include <charconv>

namespace gantry {

nlohmann::json ParseAnswerJson(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxAnswerJsonDepth) return nlohmann::json(nlohmann::json::value_t::discarded);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return nlohmann::json::parse(body, nullptr, false);
}

bool HeaderNameLess::operator()(const std::string& a, const std::string& b) const {
  return ::strcasecmp(a.c_str(), b.c_str()) < 0;
}

std::string HttpResponse::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

bool MayHaveArrived(HttpFailure failure) { return failure == HttpFailure::kWrite || failure == HttpFailure::kRead; }

Status CheckHeaders(const HttpRequest& request) {
  const std::string breaks("\r\n\0", 3);
  for (const auto& [name, value] : request.headers) {
    if (name.find_first_of(breaks) != std::string::npos || value.find_first_of(breaks) != std::string::npos ||
        name.find(':') != std::string::npos)
      return Status::Invalid(name, fmt::format("the {} header holds a line break or a NUL: not sent", name));
  }
  return Status::Ok();
}

HttpResponse NotSent(std::string why) {
  HttpResponse r;
  r.failure = HttpFailure::kUnsupported;
  r.failure_detail = std::move(why);
  return r;
}

std::string DescribeFailure(const HttpResponse& r) {
  switch (r.failure) {
    case HttpFailure::kNone: return "answered";
    case HttpFailure::kConnect: return "connection refused or unreachable";
    case HttpFailure::kConnectTimeout: return "no connection within the connect timeout";
    case HttpFailure::kWrite: return "the connection broke while sending the request";
    case HttpFailure::kRead: return "the connection broke while reading the answer";
    case HttpFailure::kTlsHandshake: return "the TLS handshake failed";
    case HttpFailure::kTlsUntrusted:
      return "the server's certificate is not trusted (set ca_cert in the config or GANTRY_CA_CERT)";
    case HttpFailure::kUnsupported: return r.failure_detail;
  }
  return r.failure_detail;
}

Expected<ServerAddress> SplitServerAddress(const std::string& url) {
  ServerAddress a;
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return Status::Invalid("server", fmt::format("'{}' has no http:// or https://", url));
  a.scheme = url.substr(0, scheme_end);
  if (a.scheme != "http" && a.scheme != "https")
    return Status::Invalid("server", fmt::format("'{}': only http:// and https:// addresses", url));
  std::string rest = url.substr(scheme_end + 3);
  size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    a.prefix = rest.substr(slash);
    rest.resize(slash);
    while (!a.prefix.empty() && a.prefix.back() == '/') a.prefix.pop_back();
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [v6]:port
    size_t close = rest.find(']');
    if (close == std::string::npos) return Status::Invalid("server", fmt::format("'{}': an unclosed [", url));
    a.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return Status::Invalid("server", fmt::format("'{}': ':' after ]", url));
      port = rest.substr(close + 2);
    }
  } else {
    size_t colon = rest.find(':');
    a.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (a.host.empty()) return Status::Invalid("server", fmt::format("'{}' names no host", url));
  a.port = a.scheme == "https" ? 443 : 80;
  if (!port.empty()) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), a.port);
    if (ec != std::errc() || end != port.data() + port.size() || a.port < 1 || a.port > 65535)
      return Status::Invalid("server", fmt::format("'{}': the port must be 1-65535", url));
  }
  return a;
}

std::string HostAndPort(const ServerAddress& a) {
  if (a.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", a.host, a.port);
  return fmt::format("{}:{}", a.host, a.port);
}

namespace {

class FailingHttpConnection final : public HttpConnection {
 public:
  explicit FailingHttpConnection(std::string why) : why_(std::move(why)) {}
  HttpResponse Send(const HttpRequest&) override { return NotSent(why_); }

 private:
  std::string why_;
};

}  // namespace

std::unique_ptr<HttpConnection> FailingConnection(std::string why) {
  return std::make_unique<FailingHttpConnection>(std::move(why));
}

}  // namespace gantry
