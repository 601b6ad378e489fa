// Rewriting requests to and answers from a job's port (see port_proxy_http.h).
#include "server/port_proxy_http.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace gantry {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Headers the browser's request does not carry to the job: hop-by-hop ones (RFC 9110 7.6.1),
// Gantry's credentials, what we set ourselves, and the forwarding headers a client could
// forge.
const std::set<std::string>& DroppedRequestHeaders() {
  static const std::set<std::string> names = {"authorization",
                                              "proxy-authorization",
                                              "cookie",
                                              "connection",
                                              "keep-alive",
                                              "proxy-connection",
                                              "te",
                                              "trailer",
                                              "upgrade",
                                              "transfer-encoding",
                                              "content-length",
                                              "expect",
                                              "forwarded",
                                              "x-real-ip",
                                              "x-forwarded-for",
                                              "x-forwarded-host",
                                              "x-forwarded-proto",
                                              "x-forwarded-port",
                                              "x-gantry-team",
                                              "x-forwarded-prefix",
                                              "remote_addr",
                                              "remote_port",
                                              "local_addr",
                                              "local_port",
                                              "x-gantry-port-token"};
  return names;
}

bool IsGantryCookie(std::string_view name) { return Lower(Trim(name)).rfind("gantry_", 0) == 0; }

// Each "name=value" of a Cookie header.
std::vector<std::string_view> CookiePairs(std::string_view header) {
  std::vector<std::string_view> pairs;
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = Trim(header.substr(0, semi));
    if (!pair.empty()) pairs.push_back(pair);
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return pairs;
}

// A job's cookie as the browser may keep it: none in Gantry's name or without a name, none
// for a Domain (a parent domain's cookies reach the dashboard), and its Path inside the
// port's prefix (the dashboard and other ports may share the host: cookies ignore ports).
std::optional<std::string> ScopedCookie(std::string_view value, std::string_view prefix) {
  size_t semi = value.find(';');
  std::string_view pair = Trim(value.substr(0, semi));
  size_t eq = pair.find('=');
  if (eq == std::string_view::npos || Trim(pair.substr(0, eq)).empty() || IsGantryCookie(pair.substr(0, eq))) {
    return std::nullopt;
  }
  std::string out(pair);
  bool path_given = false;
  for (std::string_view rest = semi == std::string_view::npos ? "" : value.substr(semi + 1); !rest.empty();) {
    size_t next = rest.find(';');
    std::string_view attribute = Trim(rest.substr(0, next));
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
    std::string lower = Lower(attribute.substr(0, attribute.find('=')));
    lower = std::string(Trim(lower));
    if (lower == "domain") return std::nullopt;
    // A name with blanks inside ("d omain") is no attribute a browser knows: dropped, so
    // nothing that reads names more loosely can take it for a Domain.
    if (lower.find_first_of(" \t") != std::string::npos) continue;
    if (lower == "path") {
      std::string_view path = Trim(attribute.substr(attribute.find('=') + 1));
      path_given = true;
      // Outside the prefix (or climbing out of it): the prefix itself.
      bool inside = path.substr(0, prefix.size()) == prefix && path.find("..") == std::string_view::npos;
      out += "; Path=" + std::string(inside ? path : prefix);
      continue;
    }
    if (!attribute.empty()) out += "; " + std::string(attribute);
  }
  if (!path_given) out += "; Path=" + std::string(prefix);
  return out;
}

}  // namespace

bool AsksUpgrade(const httplib::Request& req) {
  if (!req.has_header("Upgrade")) return false;
  std::string connection = Lower(req.get_header_value("Connection"));
  size_t at = 0;
  while (at <= connection.size()) {
    size_t comma = connection.find(',', at);
    if (Trim(std::string_view(connection).substr(at, comma - at)) == "upgrade") return true;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return false;
}

std::string CookiesForUpstream(std::string_view cookie_header) {
  std::string out;
  for (std::string_view pair : CookiePairs(cookie_header)) {
    if (IsGantryCookie(pair.substr(0, pair.find('=')))) continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

std::vector<std::string> CookieValues(const httplib::Request& req, std::string_view name) {
  std::vector<std::string> values;
  auto [from, to] = req.headers.equal_range("Cookie");
  for (auto it = from; it != to; ++it) {
    for (std::string_view pair : CookiePairs(it->second)) {
      size_t eq = pair.find('=');
      if (eq != std::string_view::npos && Trim(pair.substr(0, eq)) == name) {
        values.emplace_back(Trim(pair.substr(eq + 1)));
      }
    }
  }
  return values;
}

std::string UpstreamRequest(const httplib::Request& req, const std::string& prefix, bool upgrade, bool tls) {
  std::string out = fmt::format("{} {} HTTP/1.1\r\n", req.method, req.target);
  std::string cookies;
  for (const auto& [name, value] : req.headers) {
    std::string lower = Lower(name);
    if (lower == "cookie") {
      std::string kept = CookiesForUpstream(value);
      if (!kept.empty()) cookies += (cookies.empty() ? "" : "; ") + kept;
    }
    if (DroppedRequestHeaders().count(lower)) continue;
    out += name + ": " + value + "\r\n";
  }
  if (!cookies.empty()) out += "Cookie: " + cookies + "\r\n";
  if (upgrade) {
    out += "Connection: Upgrade\r\nUpgrade: " + req.get_header_value("Upgrade") + "\r\n";
  } else {
    out += "Connection: close\r\n";
  }
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    out += fmt::format("Content-Length: {}\r\n", req.body.size());
  }
  out += fmt::format("X-Forwarded-For: {}\r\nX-Forwarded-Proto: {}\r\nX-Forwarded-Prefix: {}\r\n", req.remote_addr,
                     tls ? "https" : "http", prefix);
  if (req.has_header("Host")) out += "X-Forwarded-Host: " + req.get_header_value("Host") + "\r\n";
  out += "\r\n";
  out += req.body;
  return out;
}

std::optional<BrowserAnswer> BrowserAnswerHead(std::string_view head, bool upgrade_asked, std::string_view prefix) {
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") return std::nullopt;
  head.remove_suffix(2);  // each line below ends in \r\n
  // A CR or LF that does not end a line (or a NUL) could split a line in the browser's reading.
  for (size_t i = 0; i < head.size(); ++i) {
    char c = head[i];
    if (c == '\0' || (c == '\r' && head[i + 1] != '\n') || (c == '\n' && (i == 0 || head[i - 1] != '\r'))) {
      return std::nullopt;
    }
  }
  size_t eol = head.find("\r\n");
  std::string_view status_line = head.substr(0, eol);
  // "HTTP/1.1 200 OK": a version, a three-digit status, a reason (maybe empty).
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ' ||
      !std::all_of(status_line.begin() + 9, status_line.begin() + 12, [](char c) { return c >= '0' && c <= '9'; }) ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    return std::nullopt;
  }
  BrowserAnswer answer;
  answer.status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  if (answer.status < 100) return std::nullopt;
  const bool upgraded = upgrade_asked && answer.status == 101;
  answer.head = std::string(status_line) + "\r\n";
  for (size_t at = eol + 2; at < head.size();) {
    size_t end = head.find("\r\n", at);
    std::string_view line = head.substr(at, end - at);
    at = end + 2;
    size_t colon = line.find(':');
    // Obsolete line folding and lines without a name are refused, not guessed at (RFC 9112 5.2).
    if (line.empty() || colon == 0 || colon == std::string_view::npos || line[0] == ' ' || line[0] == '\t') {
      return std::nullopt;
    }
    std::string name = Lower(line.substr(0, colon));
    if (name.find_first_of(" \t") != std::string::npos) return std::nullopt;
    std::string_view value = Trim(line.substr(colon + 1));
    if (name == "set-cookie") {
      std::optional<std::string> scoped = ScopedCookie(value, prefix);
      if (!scoped) continue;
      answer.head += "Set-Cookie: " + *scoped + "\r\n";
      continue;
    }
    if (!upgraded && (name == "connection" || name == "keep-alive")) continue;
    answer.head += std::string(line) + "\r\n";
  }
  if (!upgraded && answer.status != 101) answer.head += "Connection: close\r\n";
  if (!upgraded && answer.status == 101) return std::nullopt;  // an upgrade nobody asked for
  answer.head += "\r\n";
  return answer;
}

}  // namespace gantry
