// The TLS transport: cpp-httplib with OpenSSL, for https:// servers. It loads OpenSSL, so
// the lean `gantry` binary does not link it (its https calls are gantryd's).
#pragma once

#include <memory>
#include <string>

#include "net/http_exchange.h"

namespace gantry {

// A connection to `url` (http:// or https://, with an optional path prefix).
std::unique_ptr<HttpConnection> ConnectWithHttplib(const std::string& url, const HttpConnectionOptions& options);

// https:// through cpp-httplib, http:// through the plain transport (plain_http_connection.h):
// what the agent and gantryd use.
std::unique_ptr<HttpConnection> ConnectAnyScheme(const std::string& url, const HttpConnectionOptions& options);

}  // namespace gantry
