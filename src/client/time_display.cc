// Local and relative time for the client's tables, and the --since/--until parser.
#include "client/time_display.h"

#include <fmt/format.h>

#include <cstdio>
#include <ctime>

#include "core/clock.h"
#include "core/duration.h"

namespace gantry {

namespace {

// Seconds since the epoch from broken-down local time; -1 when it does not exist.
bool LocalToMs(int year, int month, int day, int hour, int minute, int second, TimeMs* out) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1) || tm.tm_mday != day || tm.tm_mon != month - 1) return false;
  *out = static_cast<TimeMs>(t) * kSecondMs;
  return true;
}

// "YYYY-MM-DD", "YYYY-MM-DD HH:MM", "YYYY-MM-DDTHH:MM:SS" (optionally ending Z).
bool ParseDateTime(const std::string& text, bool utc, TimeMs* out) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, used = 0;
  std::string t = text;
  bool zulu = !t.empty() && (t.back() == 'Z' || t.back() == 'z');
  if (zulu) t.pop_back();
  int fields = std::sscanf(t.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &used);
  if (fields != 3) return false;
  std::string rest = t.substr(static_cast<size_t>(used));
  if (!rest.empty()) {
    if (rest[0] != ' ' && rest[0] != 'T') return false;
    int n = 0;
    int got = std::sscanf(rest.c_str() + 1, "%2d:%2d%n:%2d%n", &h, &mi, &n, &s, &n);
    if (got < 2 || static_cast<size_t>(n) + 1 != rest.size()) return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || y < 1970) return false;
  if (utc || zulu) return ParseUtc(fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, mo, d, h, mi, s), out);
  return LocalToMs(y, mo, d, h, mi, s, out);
}

}  // namespace

TimeStyle CurrentTimeStyle(bool utc) { return {utc, WallClock().NowMs()}; }

std::string ShowTime(const std::string& iso, const TimeStyle& style) {
  TimeMs t = 0;
  if (iso.empty() || !ParseUtc(iso, &t)) return iso;
  std::time_t secs = static_cast<std::time_t>(t / kSecondMs);
  std::tm tm{};
  if (style.utc) {
    gmtime_r(&secs, &tm);
  } else {
    localtime_r(&secs, &tm);
  }
  char buf[64];
  std::strftime(buf, sizeof(buf), style.utc ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

std::string Age(const std::string& iso, const TimeStyle& style) {
  TimeMs t = 0;
  if (iso.empty() || !ParseUtc(iso, &t)) return "";
  DurationMs d = style.now - t;
  if (d > -kSecondMs && d < kSecondMs) return "now";
  return d > 0 ? FormatDuration(d) + " ago" : "in " + FormatDuration(-d);
}

std::string Elapsed(const nlohmann::json& job, const TimeStyle& style) {
  TimeMs start = 0, end = style.now;
  if (!ParseUtc(job.value("started_at", ""), &start)) return "";
  std::string ended = job.value("ended_at", "");
  if (!ended.empty() && !ParseUtc(ended, &end)) return "";
  return FormatDuration(std::max<DurationMs>(0, end - start));
}

Expected<std::string> ParseWhen(const std::string& flag, const std::string& text, const TimeStyle& style) {
  TimeMs t = 0;
  if (text == "now") {
    t = style.now;
  } else if (ParseDateTime(text, style.utc, &t)) {
    // a date, or a date and time
  } else if (auto back = ParseDuration(text, kMinuteMs); back) {
    t = style.now - *back;
  } else {
    return Status::Invalid(flag,
                           "expected a time: 2h (ago), 3d, now, 2026-11-26, '2026-11-26 14:00' (local; UTC "
                           "with --utc or a trailing Z), not '" +
                               text.substr(0, 60) + "'");
  }
  return FormatUtc(t);
}

}  // namespace gantry
