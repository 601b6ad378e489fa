// Month and day boundaries in the billing time zone (IANA names through the system's
// tz database, default UTC), so "November" means the same interval to finance everywhere.
#pragma once

#include <string>
#include <utility>

#include "core/status.h"
#include "core/time.h"

namespace date {
class time_zone;
}

namespace gantry {

class Calendar {
 public:
  Calendar() = default;  // UTC
  // "UTC" or an IANA name such as "Europe/Berlin"; NotFound-style error naming `field`.
  static Expected<Calendar> ForZone(const std::string& name, const std::string& field = "timezone");

  const std::string& zone_name() const { return name_; }
  // [start, end) of "YYYY-MM" in this zone.
  Expected<std::pair<TimeMs, TimeMs>> MonthBounds(const std::string& month) const;
  // "YYYY-MM" and "YYYY-MM-DD" of an instant in this zone.
  std::string MonthOf(TimeMs t) const;
  std::string DayOf(TimeMs t) const;
  // The start of the local day after the one holding `t`.
  TimeMs NextDay(TimeMs t) const;
  // The start of the local month holding `t`, and of the month after.
  TimeMs MonthStart(TimeMs t) const;
  TimeMs NextMonth(TimeMs t) const;
  // "2026-12-01" (local midnight) or a UTC timestamp "2026-12-01T08:00:00Z".
  Expected<TimeMs> ParseDate(const std::string& text, const std::string& field) const;

 private:
  const date::time_zone* zone_ = nullptr;  // null: UTC
  std::string name_ = "UTC";
};

}  // namespace gantry
