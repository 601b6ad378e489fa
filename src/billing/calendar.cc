// Calendar arithmetic on Howard Hinnant's date library (Debian's libhowardhinnant-date),
// which reads the system tz database.
#include "billing/calendar.h"

#include <date/date.h>
#include <date/tz.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace gantry {

namespace {

using Ms = std::chrono::milliseconds;
using SysMs = date::sys_time<Ms>;
using LocalMs = date::local_time<Ms>;

LocalMs ToLocal(const date::time_zone* zone, TimeMs t) {
  SysMs sys{Ms(t)};
  if (!zone) return LocalMs{sys.time_since_epoch()};
  return zone->to_local(sys);
}

TimeMs ToSys(const date::time_zone* zone, date::local_days day) {
  LocalMs local{std::chrono::duration_cast<Ms>(day.time_since_epoch())};
  if (!zone) return local.time_since_epoch().count();
  // A midnight skipped by a DST change maps to the first instant after the gap.
  return zone->to_sys(local, date::choose::earliest).time_since_epoch().count();
}

bool ParseYearMonth(const std::string& text, int* y, unsigned* m) {
  int year = 0, month = 0;
  char tail = 0;
  if (text.size() != 7 || std::sscanf(text.c_str(), "%4d-%2d%c", &year, &month, &tail) != 2) return false;
  if (year < 1970 || year > 9999 || month < 1 || month > 12) return false;
  *y = year;
  *m = static_cast<unsigned>(month);
  return true;
}

}  // namespace

Expected<Calendar> Calendar::ForZone(const std::string& name, const std::string& field) {
  Calendar c;
  if (name.empty() || name == "UTC" || name == "Etc/UTC") return c;
  try {
    c.zone_ = date::locate_zone(name);
  } catch (const std::exception&) {
    return Status::Invalid(field, fmt::format("unknown time zone '{}' (use an IANA name like Europe/Berlin)", name));
  }
  c.name_ = name;
  return c;
}

Expected<std::pair<TimeMs, TimeMs>> Calendar::MonthBounds(const std::string& month) const {
  int y = 0;
  unsigned m = 0;
  if (!ParseYearMonth(month, &y, &m)) return Status::Invalid("month", "must be YYYY-MM, e.g. 2026-11");
  date::year_month ym{date::year{y}, date::month{m}};
  date::year_month next = ym + date::months{1};
  return std::pair{ToSys(zone_, date::local_days{ym / 1}), ToSys(zone_, date::local_days{next / 1})};
}

std::string Calendar::MonthOf(TimeMs t) const {
  date::year_month_day ymd{date::floor<date::days>(ToLocal(zone_, t))};
  return fmt::format("{:04d}-{:02d}", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()));
}

std::string Calendar::DayOf(TimeMs t) const {
  date::year_month_day ymd{date::floor<date::days>(ToLocal(zone_, t))};
  return fmt::format("{:04d}-{:02d}-{:02d}", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                     static_cast<unsigned>(ymd.day()));
}

TimeMs Calendar::NextDay(TimeMs t) const {
  date::local_days day = date::floor<date::days>(ToLocal(zone_, t));
  return ToSys(zone_, day + date::days{1});
}

TimeMs Calendar::MonthStart(TimeMs t) const {
  date::year_month_day ymd{date::floor<date::days>(ToLocal(zone_, t))};
  return ToSys(zone_, date::local_days{ymd.year() / ymd.month() / 1});
}

TimeMs Calendar::NextMonth(TimeMs t) const {
  date::year_month_day ymd{date::floor<date::days>(ToLocal(zone_, t))};
  date::year_month next = ymd.year() / ymd.month() + date::months{1};
  return ToSys(zone_, date::local_days{next / 1});
}

Expected<TimeMs> Calendar::ParseDate(const std::string& text, const std::string& field) const {
  int y = 0, m = 0, d = 0;
  char tail = 0;
  if (text.size() == 10 && std::sscanf(text.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) == 3) {
    date::year_month_day ymd{date::year{y}, date::month{static_cast<unsigned>(m)}, date::day{static_cast<unsigned>(d)}};
    if (y >= 1970 && ymd.ok()) return ToSys(zone_, date::local_days{ymd});
  }
  TimeMs t = 0;
  if (ParseUtc(text, &t)) return t;
  return Status::Invalid(field, "must be a date YYYY-MM-DD or a UTC time YYYY-MM-DDTHH:MM:SSZ");
}

}  // namespace gantry
