// PlainHttpConnection: the shared Beast connection (beast_http_connection.h) over a bare
// TCP stream.
#include "net/plain_http_connection.h"

#include "net/beast_http_connection.h"

namespace gantry {

namespace {

class PlainHttpConnection final : public beast_http::BeastHttpConnection<boost::beast::tcp_stream> {
 public:
  using BeastHttpConnection::BeastHttpConnection;

 private:
  boost::beast::tcp_stream NewStream() override { return boost::beast::tcp_stream(io_); }
  boost::beast::error_code Secure(HttpResponse&) override { return {}; }
};

}  // namespace

std::unique_ptr<HttpConnection> ConnectPlainHttp(const std::string& url, const HttpConnectionOptions& options) {
  auto address = SplitServerAddress(url);
  if (!address) return FailingConnection(address.status().message());
  if (address->scheme != "http")
    return FailingConnection(fmt::format("{}: this transport speaks plain http:// only", url));
  return std::make_unique<PlainHttpConnection>(std::move(*address), options);
}

}  // namespace gantry
