// One HTTP request and its answer, apart from the stream that carries them: the CLI's
// plain-HTTP transport (plain_http_connection.h) and the TLS one (tls_http_connection.h)
// both take an HttpRequest and give back an HttpResponse, so the
// leader-following rounds and the commands are written once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gantry {

// Header names compared as HTTP compares them: without case.
struct HeaderNameLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using HttpHeaders = std::multimap<std::string, std::string, HeaderNameLess>;

struct HttpRequest {
  std::string method;  // GET, POST, PATCH, DELETE
  std::string path;    // with its query, from the server's root (a URL's path prefix is added)
  HttpHeaders headers;
  std::string body;
  std::string content_type;  // for a body
};

// Why a request got no answer.
enum class HttpFailure {
  kNone,
  kConnect,         // refused or unreachable: never sent
  kConnectTimeout,  // no connection in time: never sent
  kWrite,           // the connection broke while sending: may have arrived
  kRead,            // no (whole) answer: may have been applied
  kTlsHandshake,    // never sent
  kTlsUntrusted,    // the server's certificate: never sent
  kUnsupported,     // this transport cannot reach the address (say, https without TLS): never sent
};

struct HttpResponse {
  HttpFailure failure = HttpFailure::kNone;
  std::string failure_detail;  // the library's words, for the unusual failures
  int status = 0;
  HttpHeaders headers;
  std::string body;

  explicit operator bool() const { return failure == HttpFailure::kNone; }
  // The first value of a header, "" when there is none.
  std::string Header(const std::string& name) const;
};

// Whether a request that got no answer may still have reached the server (the connection
// broke while sending or reading): such a request is sent again only when that is safe.
bool MayHaveArrived(HttpFailure failure);

// Refuses a request whose header names or values hold a line break or a NUL (or a name
// a colon): sent, they would add headers or end the request early. Both transports check.
Status CheckHeaders(const HttpRequest& request);

// The answer to a request a transport does not send: kUnsupported with `why`.
HttpResponse NotSent(std::string why);

// Why a request got no answer, in words a user can act on.
std::string DescribeFailure(const HttpResponse& r);

// A server address split for a transport: "https://b:8443/gantry" → https, b, 8443, /gantry.
struct ServerAddress {
  std::string scheme;  // http or https
  std::string host;    // without the brackets of an IPv6 literal
  int port = 0;        // the scheme's default when none is given
  std::string prefix;  // a path every request goes under ("" or "/x/y")
};
Expected<ServerAddress> SplitServerAddress(const std::string& url);
// "host:port", or "[v6]:port" (a Host header's form).
std::string HostAndPort(const ServerAddress& a);

// The largest answer either transport takes, framing included (a queue of 100,000 jobs as
// JSON is about 50 MB; parsed, JSON takes up to 18 times its text).
inline constexpr std::uint64_t kMaxAnswerBytes = std::uint64_t{128} << 20;

// An answer's body as JSON, or a discarded value (is_discarded()) when it is not JSON or
// nests deeper than kMaxAnswerJsonDepth: a body of `[[[[...` parses into a node per
// bracket, gigabytes from a 128 MiB answer, and recursive code walks it.
inline constexpr int kMaxAnswerJsonDepth = 64;
nlohmann::json ParseAnswerJson(std::string_view body);

// Options every connection to a server takes.
struct HttpConnectionOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};  // sending and the answer
  std::string ca_cert;                                               // PEM CA for https (else the system's CAs)
};

// A keep-alive connection to one server, opened when first needed and opened again when
// the server closed it. One thread at a time.
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  virtual HttpResponse Send(const HttpRequest& request) = 0;
};

// A connection whose every request fails as kUnsupported with `why` (an address a
// transport cannot reach).
std::unique_ptr<HttpConnection> FailingConnection(std::string why);

// Makes the connection for one server address.
using HttpConnector = std::function<std::unique_ptr<HttpConnection>(const std::string& url)>;

}  // namespace gantry
