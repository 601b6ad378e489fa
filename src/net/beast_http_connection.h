// BeastHttpConnection: Boost.Beast requests on one keep-alive stream (TCP, or TLS over
// TCP), each step run to its end (or its timeout) on a private io_context, so the caller
// sees a plain blocking call. Both transports are this one class, so a hostile server meets
// the same limits over either: one deadline and one byte budget for the whole answer, caps
// on headers, unparsed bytes and interim answers, and no byte past an answer ever read as
// the next one's.
#pragma once

#include <fmt/format.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>

#include "net/http_exchange.h"

namespace gantry::beast_http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint32_t kMaxAnswerHeaderBytes = 64 * 1024;
// What the read buffer may hold unparsed (a header, one chunk-size line).
constexpr std::size_t kMaxUnparsedBytes = 1 << 20;
constexpr int kMaxInterimAnswers = 8;

// The request target as sent: control characters, spaces and bytes past ASCII
// percent-encoded (an id with a line break cannot add a header or a second request).
inline std::string EncodeTarget(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (c <= 0x20 || c >= 0x7f) {
      out += fmt::format("%{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A connection over `Stream` (beast::tcp_stream, or an ssl_stream over one); a subclass
// opens it (OpenStream: connect, and for TLS the handshake).
template <class Stream>
class BeastHttpConnection : public HttpConnection {
 public:
  BeastHttpConnection(ServerAddress address, HttpConnectionOptions options)
      : address_(std::move(address)), options_(std::move(options)), host_header_(HostAndPort(address_)) {}
  HttpResponse Send(const HttpRequest& request) override {
    // Checked before any connection is opened: such a request is never sent.
    if (Status s = CheckHeaders(request); !s.ok()) return NotSent(s.message());
    HttpResponse r;
    if (stream_ && ClosedByServer()) stream_.reset();
    if (!stream_ && !Open(r)) return r;

    auto verb = http::string_to_verb(request.method);
    http::request<http::string_body> q{verb, EncodeTarget(address_.prefix + request.path), 11};
    q.set(http::field::host, host_header_);
    for (const auto& [name, value] : request.headers) q.insert(name, value);
    if (verb != http::verb::get || !request.body.empty()) {
      if (!request.content_type.empty()) q.set(http::field::content_type, request.content_type);
      q.body() = request.body;
      q.prepare_payload();
    }
    beast::error_code ec;
    Lowest().expires_after(options_.read_timeout);
    http::async_write(*stream_, q, [&ec](beast::error_code e, std::size_t) { ec = e; });
    RunToEnd();
    if (ec) return Broken(HttpFailure::kWrite, ec);

    // The answer, read a piece at a time against one budget of bytes and one deadline:
    // interim answers (100 Continue), chunk-size lines, extensions and trailers all count,
    // and a line that never ends stops at the buffer's cap.
    const auto deadline = std::chrono::steady_clock::now() + options_.read_timeout;
    std::uint64_t budget = kMaxAnswerBytes;
    std::optional<http::response_parser<http::string_body>> parser;
    for (int interim = 0;; ++interim) {
      if (interim > kMaxInterimAnswers) return Broken(HttpFailure::kRead, "too many interim (1xx) answers");
      parser.emplace();
      parser->body_limit(kMaxAnswerBytes);
      parser->header_limit(kMaxAnswerHeaderBytes);
      bool header_checked = false;
      while (!parser->is_done()) {
        if (std::chrono::steady_clock::now() > deadline)
          return Broken(HttpFailure::kRead, "the read timeout passed before the whole answer came");
        std::size_t got = 0;
        http::async_read_some(*stream_, buffer_, *parser, [&ec, &got](beast::error_code e, std::size_t n) {
          ec = e;
          got = n;
        });
        RunToEnd();
        if (ec) return Broken(HttpFailure::kRead, ec);
        if (got > budget) return Broken(HttpFailure::kRead, fmt::format("an answer past {} bytes", kMaxAnswerBytes));
        budget -= got;
        // A Content-Length past the limit is refused before the body is read (Beast 1.74
        // reserves the length it is told before checking its own limit).
        if (!header_checked && parser->is_header_done()) {
          header_checked = true;
          if (auto length = parser->content_length(); length && *length > kMaxAnswerBytes)
            return Broken(HttpFailure::kRead,
                          fmt::format("an answer of {} bytes is past the body limit of {}", *length, kMaxAnswerBytes));
        }
      }
      const unsigned status = parser->get().result_int();
      if (status < 100 || status >= 200) break;
    }

    http::response<http::string_body>& answer = parser->get();
    r.status = static_cast<int>(answer.result_int());
    for (const auto& field : answer) r.headers.emplace(std::string(field.name_string()), std::string(field.value()));
    r.body = std::move(answer.body());
    // Bytes past the answer were never asked for: the connection is not used again, so they
    // can never be read as the next request's answer.
    if (!answer.keep_alive() || buffer_.size() > 0 || HasUnreadBytes()) stream_.reset();
    return r;
  }

 protected:
  // A new, unconnected stream on io_.
  virtual Stream NewStream() = 0;
  // After the TCP connection: what else opening takes (TLS: the handshake, within the
  // connect timeout); an error fails the request, `r` may say more.
  virtual beast::error_code Secure(HttpResponse& r) = 0;
  // Whether bytes past the answer wait below Beast's buffer (TLS: decrypted or not yet).
  virtual bool HasUnreadBytes() { return false; }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(*stream_); }

  // Runs the queued operation until it completes or its stream's timer closes it.
  void RunToEnd() {
    io_.restart();
    io_.run();
  }

  // Resolves and connects to the server, then lets the subclass finish (the TLS handshake).
  bool Open(HttpResponse& r) {
    buffer_.clear();
    tcp::resolver resolver(io_);
    beast::error_code ec;
    auto endpoints = resolver.resolve(address_.host, std::to_string(address_.port), ec);
    if (ec) {
      r.failure = HttpFailure::kConnect;
      r.failure_detail = fmt::format("cannot resolve {}: {}", address_.host, ec.message());
      return false;
    }
    stream_.emplace(NewStream());
    Lowest().expires_after(options_.connect_timeout);
    Lowest().async_connect(endpoints, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    RunToEnd();
    if (!ec) Lowest().socket().set_option(tcp::no_delay(true), ec);
    if (!ec) ec = Secure(r);
    if (ec) {
      if (r.failure == HttpFailure::kNone)
        r.failure = ec == beast::error::timeout ? HttpFailure::kConnectTimeout : HttpFailure::kConnect;
      if (r.failure_detail.empty()) r.failure_detail = ec.message();
      stream_.reset();
      return false;
    }
    return true;
  }

  // Whether the server closed the kept connection since the last answer (its idle
  // timeout): a request is then sent on a new one instead of failing on the old.
  bool ClosedByServer() {
    char byte;
    ssize_t n = ::recv(Lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

  HttpResponse Broken(HttpFailure failure, const beast::error_code& ec) { return Broken(failure, ec.message()); }
  HttpResponse Broken(HttpFailure failure, std::string why) {
    stream_.reset();
    HttpResponse r;
    r.failure = failure;
    r.failure_detail = std::move(why);
    return r;
  }

  ServerAddress address_;
  HttpConnectionOptions options_;
  std::string host_header_;
  asio::io_context io_{1};
  std::optional<Stream> stream_;
  beast::flat_buffer buffer_{kMaxUnparsedBytes};
};

}  // namespace gantry::beast_http
