// TlsHttpConnection: the shared Beast connection over an OpenSSL stream; the handshake
// checks the chain and the host (SSL_set1_host, or the IP address for a literal).
#include "net/tls_http_connection.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>

#include "net/beast_http_connection.h"
#include "net/plain_http_connection.h"

namespace gantry {

namespace {

namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

class TlsHttpConnection final : public beast_http::BeastHttpConnection<TlsStream> {
 public:
  TlsHttpConnection(ServerAddress address, HttpConnectionOptions options, std::unique_ptr<ssl::context> context)
      : BeastHttpConnection(std::move(address), std::move(options)), context_(std::move(context)) {}

 private:
  TlsStream NewStream() override { return TlsStream(io_, *context_); }

  beast::error_code Secure(HttpResponse& r) override {
    SSL* tls = stream_->native_handle();
    beast::error_code ec;
    auto ip = boost::asio::ip::make_address(address_.host, ec);
    X509_VERIFY_PARAM* checks = SSL_get0_param(tls);
    bool named =
        ec ? SSL_set_tlsext_host_name(tls, address_.host.c_str()) == 1 && SSL_set1_host(tls, address_.host.c_str()) == 1
           : X509_VERIFY_PARAM_set1_ip_asc(checks, ip.to_string().c_str()) == 1;
    if (!named) {
      r.failure = HttpFailure::kTlsHandshake;
      r.failure_detail = fmt::format("cannot check a certificate for host {}", address_.host);
      return beast::error_code(EINVAL, beast::generic_category());
    }
    ec = {};
    Lowest().expires_after(options_.connect_timeout);
    stream_->async_handshake(ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    RunToEnd();
    if (!ec) return ec;
    if (long verified = SSL_get_verify_result(tls); verified != X509_V_OK) {
      r.failure = HttpFailure::kTlsUntrusted;
      r.failure_detail = fmt::format("the server's certificate is not trusted for {}: {}", address_.host,
                                     X509_verify_cert_error_string(verified));
    } else {
      r.failure = ec == beast::error::timeout ? HttpFailure::kConnectTimeout : HttpFailure::kTlsHandshake;
      r.failure_detail = fmt::format("TLS handshake with {}: {}", address_.host, ec.message());
    }
    return ec;
  }

  bool HasUnreadBytes() override {
    SSL* tls = stream_->native_handle();
    return SSL_pending(tls) > 0 || BIO_ctrl_pending(SSL_get_rbio(tls)) > 0;
  }

  std::unique_ptr<ssl::context> context_;
};

// The client's TLS settings: 1.2 or later, peers verified against `ca_cert` (a PEM file)
// or the system's CAs.
Expected<std::unique_ptr<ssl::context>> ClientContext(const std::string& ca_cert) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->set_verify_mode(ssl::verify_peer);
  beast::error_code ec;
  if (ca_cert.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->load_verify_file(ca_cert, ec);
  }
  if (ec)
    return Status::Invalid("ca_cert", fmt::format("cannot load CA certificates from {}: {}",
                                                  ca_cert.empty() ? "the system" : ca_cert, ec.message()));
  return context;
}

}  // namespace

std::unique_ptr<HttpConnection> ConnectTls(const std::string& url, const HttpConnectionOptions& options) {
  auto address = SplitServerAddress(url);
  if (!address) return FailingConnection(address.status().message());
  if (address->scheme != "https") return FailingConnection(fmt::format("{}: this transport speaks https:// only", url));
  auto context = ClientContext(options.ca_cert);
  if (!context) return FailingConnection(context.status().message());
  return std::make_unique<TlsHttpConnection>(std::move(*address), options, std::move(*context));
}

std::unique_ptr<HttpConnection> ConnectAnyScheme(const std::string& url, const HttpConnectionOptions& options) {
  if (url.rfind("https://", 0) == 0) return ConnectTls(url, options);
  return ConnectPlainHttp(url, options);
}

}  // namespace gantry
