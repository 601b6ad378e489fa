// TLS for upgraded connections: OpenSSL on the socket itself (not Beast's memory BIOs), so
// the session's relay can poll the socket.
#include "net/stream_upgrade_tls.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

#include "core/ssl_stream.h"

namespace gantry {

namespace {

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

}  // namespace

Expected<std::unique_ptr<ByteStream>> OpenUpgradedTlsStream(const std::string& url, const HttpRequest& request,
                                                            const HttpConnectionOptions& options,
                                                            UpgradeRefusal* refusal) {
  auto address = SplitServerAddress(url);
  if (!address) return address.status();
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Status::Internal("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  bool loaded = options.ca_cert.empty()
                    ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                    : SSL_CTX_load_verify_locations(ctx.get(), options.ca_cert.c_str(), nullptr) == 1;
  if (!loaded) {
    return Status::Invalid("ca_cert", fmt::format("cannot load CA certificates from {}",
                                                  options.ca_cert.empty() ? "the system" : options.ca_cert));
  }
  auto fd = ConnectTcp(*address, options);
  if (!fd) return fd.status();
  SSL* ssl = SSL_new(ctx.get());
  auto stream = std::make_unique<SslStream>(*fd, ssl);  // owns both from here
  SSL_set_fd(ssl, *fd);
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(address->host, ec);
  bool named =
      ec ? SSL_set_tlsext_host_name(ssl, address->host.c_str()) == 1 && SSL_set1_host(ssl, address->host.c_str()) == 1
         : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.to_string().c_str()) == 1;
  if (!named) return Status::Invalid("server", fmt::format("cannot check a certificate for host {}", address->host));
  // SslStream made the socket non-blocking: the handshake waits for it in turns.
  for (;;) {
    int r = SSL_connect(ssl);
    if (r == 1) break;
    int e = SSL_get_error(ssl, r);
    if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
        WaitReadable(*stream, static_cast<int>(options.connect_timeout.count()))) {
      continue;
    }
    long verified = SSL_get_verify_result(ssl);
    return Status(StatusCode::kUnavailable, verified != X509_V_OK
                                                ? fmt::format("the server's certificate is not trusted for {}: {}",
                                                              address->host, X509_verify_cert_error_string(verified))
                                                : fmt::format("TLS handshake with {} failed", address->host));
  }
  return FinishUpgrade(std::move(stream), *address, request, options, refusal);
}

}  // namespace gantry
