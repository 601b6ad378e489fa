// The transport for http:// servers: Boost.Beast over one keep-alive TCP connection, with
// connect and read timeouts. It links neither OpenSSL nor libcpp-httplib, so the `gantry`
// binary that uses it starts in about 2 ms (docs/BENCHMARKS.md, CLI start); https://
// addresses are the TLS transport's (tls_http_connection.h).
#pragma once

#include <memory>
#include <string>

#include "net/http_exchange.h"

namespace gantry {

// A connection to `url` (http://host[:port][/prefix]); an https:// or unreadable address
// gives a connection whose every request fails as kUnsupported, naming why.
std::unique_ptr<HttpConnection> ConnectPlainHttp(const std::string& url, const HttpConnectionOptions& options);

}  // namespace gantry
