// HttplibConnection: an HttpRequest sent with cpp-httplib's client, its answer or error
// turned into an HttpResponse.
#include "net/httplib_connection.h"

#include <fmt/format.h>
#include <httplib.h>

#include "net/plain_http_connection.h"

namespace gantry {

namespace {

HttpFailure FailureOf(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress: return HttpFailure::kConnect;
    case httplib::Error::ConnectionTimeout: return HttpFailure::kConnectTimeout;
    case httplib::Error::Write: return HttpFailure::kWrite;
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts: return HttpFailure::kTlsHandshake;
    case httplib::Error::SSLServerVerification: return HttpFailure::kTlsUntrusted;
    case httplib::Error::UnsupportedMultipartBoundaryChars:
    case httplib::Error::Compression: return HttpFailure::kUnsupported;
    default: return HttpFailure::kRead;  // Read, Canceled, Unknown: it may have arrived
  }
}

class HttplibConnection final : public HttpConnection {
 public:
  HttplibConnection(const ServerAddress& a, const HttpConnectionOptions& o)
      : client_(a.scheme + "://" + HostAndPort(a)), prefix_(a.prefix) {
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);
    client_.set_connection_timeout(o.connect_timeout);
    client_.set_read_timeout(o.read_timeout);
    client_.set_write_timeout(o.read_timeout);
    if (!o.ca_cert.empty()) client_.set_ca_cert_path(o.ca_cert.c_str());
  }

  HttpResponse Send(const HttpRequest& q) override {
    // cpp-httplib 0.11 would write them as they are.
    if (Status s = CheckHeaders(q); !s.ok()) return NotSent(s.message());
    HttpResponse r;
    httplib::Headers headers(q.headers.begin(), q.headers.end());
    const std::string path = prefix_ + q.path;
    httplib::Result result = [&] {
      if (q.method == "GET") return client_.Get(path, headers);
      if (q.method == "POST") return client_.Post(path, headers, q.body, q.content_type);
      if (q.method == "PATCH") return client_.Patch(path, headers, q.body, q.content_type);
      if (q.method == "PUT") return client_.Put(path, headers, q.body, q.content_type);
      return client_.Delete(path, headers, q.body, q.content_type);
    }();
    if (!result) {
      r.failure = FailureOf(result.error());
      r.failure_detail = httplib::to_string(result.error());
      return r;
    }
    r.status = result->status;
    for (const auto& [name, value] : result->headers) r.headers.emplace(name, value);
    r.body = std::move(result->body);
    return r;
  }

 private:
  httplib::Client client_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<HttpConnection> ConnectWithHttplib(const std::string& url, const HttpConnectionOptions& options) {
  auto address = SplitServerAddress(url);
  if (!address) return FailingConnection(address.status().message());
  return std::make_unique<HttplibConnection>(*address, options);
}

std::unique_ptr<HttpConnection> ConnectAnyScheme(const std::string& url, const HttpConnectionOptions& options) {
  if (url.rfind("https://", 0) == 0) return ConnectWithHttplib(url, options);
  return ConnectPlainHttp(url, options);
}

}  // namespace gantry
