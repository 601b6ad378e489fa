// Checks of notification settings (events, webhook URLs, mail addresses).
#include "core/notify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gantry {

namespace {

const std::vector<std::string>& KnownEvents() {
  static const std::vector<std::string> kEvents = {"start", "end", "fail", "preempt", "all"};
  return kEvents;
}

// "user@host:port" of "scheme://user@host:port/path"; "" without a scheme.
std::string Authority(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  size_t begin = scheme + 3;
  size_t end = url.find_first_of("/?#", begin);
  return url.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

Status CheckNotifyEvents(const std::string& field, const std::vector<std::string>& events) {
  for (const std::string& e : events) {
    if (std::find(KnownEvents().begin(), KnownEvents().end(), e) == KnownEvents().end()) {
      return Status::Invalid(field,
                             fmt::format("unknown event '{}' (start, end, fail, preempt, all)", e.substr(0, 40)));
    }
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> ParseNotifyEvents(const std::string& field, const std::string& text) {
  std::vector<std::string> events;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string e = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (e.empty()) return Status::Invalid(field, "an empty event in '" + text.substr(0, 80) + "'");
    events.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (Status s = CheckNotifyEvents(field, events); !s.ok()) return s;
  return events;
}

bool NotifyWants(const std::vector<std::string>& events, const std::string& event) {
  for (const std::string& e : events) {
    if (e == event || e == "all" || (e == "end" && event == "fail")) return true;
  }
  return false;
}

Status CheckWebhookUrl(const std::string& field, const std::string& url) {
  bool scheme = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
  if (!scheme || url.size() > 2048 || url.find_first_of(" \t\r\n\"'<>\\`") != std::string::npos ||
      UrlHost(url).empty()) {
    return Status::Invalid(field, "must be an http:// or https:// URL with a host (at most 2048 characters)");
  }
  if (Authority(url).find('@') != std::string::npos) {
    return Status::Invalid(field, "must not carry a user or password before the host (user@host)");
  }
  return Status::Ok();
}

std::string UrlHost(const std::string& url) {
  std::string authority = Authority(url);
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    return close == std::string::npos ? "" : Lower(authority.substr(0, close + 1));
  }
  return Lower(authority.substr(0, authority.find(':')));
}

bool HostAllowed(const std::string& host, const std::vector<std::string>& patterns) {
  for (const std::string& raw : patterns) {
    std::string p = Lower(raw);
    if (p == host) return true;
    if (p.rfind("*.", 0) == 0 && host.size() > p.size() - 1 &&
        host.compare(host.size() - (p.size() - 1), p.size() - 1, p, 1) == 0) {
      return true;
    }
  }
  return false;
}

Status CheckNotifyFormat(const std::string& field, const std::string& format) {
  if (format.empty() || format == "json" || format == "slack") return Status::Ok();
  return Status::Invalid(field, "must be json or slack, not '" + format.substr(0, 40) + "'");
}

Status CheckMailAddress(const std::string& field, const std::string& address) {
  static const char* kAllowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.@_+-";
  size_t at = address.find('@');
  bool ok = address.size() <= 254 && at != 0 && at != std::string::npos && at + 1 < address.size() &&
            address.find('@', at + 1) == std::string::npos && address.find_first_not_of(kAllowed) == std::string::npos;
  if (!ok) return Status::Invalid(field, "must be a plain address: name@example.org");
  return Status::Ok();
}

}  // namespace gantry
