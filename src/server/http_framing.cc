// Request framing as the event loop judges it before a worker gets the request: whether a
// whole request (head and body) is buffered, or one the worker will refuse unread.
#include "server/http_framing.h"

#include <strings.h>

#include <charconv>
#include <cstdint>

namespace gantry {

namespace {

// Where a chunked body that starts at `at` ends (after its last chunk and trailers), or npos
// while bytes are missing. `refuse` is set when the framing is malformed or the chunks pass
// `max_body`: the worker answers that without the rest.
size_t ChunkedEnd(std::string_view in, size_t at, size_t max_body, bool* refuse, bool* over) {
  size_t total = 0;
  for (;;) {
    size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos) {
      *refuse = in.size() - at > 1024;  // a chunk-size line is short
      return std::string_view::npos;
    }
    uint64_t size = 0;
    size_t digits_end = in.find_first_of(";\r", at);
    auto [end, ec] = std::from_chars(in.data() + at, in.data() + digits_end, size, 16);
    if (ec != std::errc() || end != in.data() + digits_end || size > max_body) {
      *refuse = true;
      *over = ec == std::errc() && end == in.data() + digits_end;
      return std::string_view::npos;
    }
    at = eol + 2;
    if (size == 0) break;
    total += size;
    if (total > max_body) {
      *refuse = *over = true;
      return std::string_view::npos;
    }
    if (in.size() < at + size + 2) return std::string_view::npos;
    at += size + 2;  // the data and its CRLF
  }
  // Trailers, then an empty line.
  for (;;) {
    size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos) {
      *refuse = in.size() - at > 8192;
      return std::string_view::npos;
    }
    if (eol == at) return at + 2;
    at = eol + 2;
  }
}

}  // namespace

RequestFraming AssessRequest(std::string_view in, size_t max_body, const BodyGate& gate) {
  RequestFraming out;
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return out;
  // The framing headers, as the worker will judge them.
  int lengths = 0, encodings = 0;
  uint64_t length = 0;
  bool length_ok = true, chunked = false;
  std::string_view authorization;
  size_t line = in.find("\r\n") + 2;  // after the request line
  while (line < head_end + 2) {
    size_t eol = in.find("\r\n", line);
    std::string_view h(in.data() + line, eol - line);
    line = eol + 2;
    size_t colon = h.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = h.substr(0, colon), value = h.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (name.size() == 14 && strncasecmp(name.data(), "Content-Length", 14) == 0) {
      ++lengths;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      length_ok = ec == std::errc() && end == value.data() + value.size();
    } else if (name.size() == 17 && strncasecmp(name.data(), "Transfer-Encoding", 17) == 0) {
      ++encodings;
      chunked = value.size() == 7 && strncasecmp(value.data(), "chunked", 7) == 0;
    } else if (name.size() == 13 && strncasecmp(name.data(), "Authorization", 13) == 0) {
      authorization = value;
    }
  }
  const size_t body = head_end + 4;
  if (lengths > 1 || encodings > 1 || (encodings == 1 && (!chunked || lengths > 0)) || !length_ok) return {true, false};
  if ((lengths == 0 || length == 0) && !chunked) return {true, false};  // no body
  if (gate) {
    // METHOD SP PATH[?QUERY] SP VERSION
    size_t path_at = in.find(' ');
    size_t path_end = path_at == std::string_view::npos ? path_at : in.find_first_of(" ?", path_at + 1);
    if (path_end == std::string_view::npos || path_end > head_end) return {true, false};
    if (!gate(in.substr(path_at + 1, path_end - path_at - 1), authorization)) return {true, false};
  }
  if (chunked) {
    bool refuse = false, over = false;
    bool whole = ChunkedEnd(in, body, max_body, &refuse, &over) != std::string_view::npos;
    return {whole || refuse, over};
  }
  if (length > max_body) return {true, false};
  out.ready = in.size() >= body + length;
  return out;
}

}  // namespace gantry
