// The TLS transport, for https:// servers: the same Beast connection as the plain one
// (beast_http_connection.h) over OpenSSL, verifying the server's certificate and name. It
// links OpenSSL, so the lean `gantry` binary does not (its https calls are gantryd's).
#pragma once

#include <memory>
#include <string>

#include "net/http_exchange.h"

namespace gantry {

// A connection to `url` (https://, with an optional path prefix): TLS 1.2 or later, the
// server's certificate checked against options.ca_cert (else the system's CAs) and its
// name or IP address against the address's host.
std::unique_ptr<HttpConnection> ConnectTls(const std::string& url, const HttpConnectionOptions& options);

// https:// through ConnectTls, http:// through the plain transport (plain_http_connection.h):
// what the agent and gantryd use.
std::unique_ptr<HttpConnection> ConnectAnyScheme(const std::string& url, const HttpConnectionOptions& options);

}  // namespace gantry
