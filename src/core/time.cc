// Formatting of times and durations for plans, reasons and reports.
#include "core/time.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <ctime>

namespace gantry {

std::string FormatUtc(TimeMs t) {
  if (t == kNever) return "never";
  std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

bool ParseUtc(const std::string& text, TimeMs* out) {
  std::tm tm{};
  char sep = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &sep, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 7 ||
      (sep != 'T' && sep != ' ')) {
    return false;
  }
  std::string rest = text.substr(consumed);
  if (!rest.empty() && rest != "Z" && rest != "+00:00") return false;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60) {
    return false;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  *out = static_cast<TimeMs>(timegm(&tm)) * 1000;
  return true;
}

std::string FormatDuration(DurationMs d) {
  if (d < 0) return fmt::format("-{}", FormatDuration(d == INT64_MIN ? INT64_MAX : -d));
  int64_t s = d / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

}  // namespace gantry
