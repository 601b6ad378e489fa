// The front end's TLS settings: a server certificate and key, TLS 1.2 at least with
// forward-secret AEAD suites, and the listening socket's options.
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "server/http_front.h"

namespace gantry {

bool RestrictTls(SSL_CTX* ctx, const std::string& ciphers) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  return SSL_CTX_set_cipher_list(ctx, ciphers.empty() ? kDefaultTlsCiphers : ciphers.c_str()) == 1;
}

Expected<std::shared_ptr<TlsContext>> TlsContext::Load(const std::string& cert_file, const std::string& key_file,
                                                       const std::string& ciphers) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return Status::Internal("cannot create a TLS context");
  auto fail = [&](const std::string& field, const std::string& what) -> Expected<std::shared_ptr<TlsContext>> {
    char err[256] = {};
    ERR_error_string_n(ERR_get_error(), err, sizeof(err));
    SSL_CTX_free(ctx);
    return Status::Invalid(field, fmt::format("{}: {}", what, err));
  };
  if (!RestrictTls(ctx, ciphers)) return fail("tls-ciphers", "no cipher suite OpenSSL knows in '" + ciphers + "'");
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return fail("tls-cert", "cannot load the certificate chain " + cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail("tls-key", "cannot load the private key " + key_file);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("tls-key", "the key does not match the certificate");
  return std::shared_ptr<TlsContext>(new TlsContext(ctx));
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

void ListenSocketOptions(int socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace gantry
