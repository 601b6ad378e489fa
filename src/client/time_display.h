// Times for people: local time (or UTC with --utc), ages ("3m ago", "in 2h"), elapsed run
// time, and the --since/--until forms users type ("2h", "2026-11-26", "2026-11-26 14:00").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct TimeStyle {
  bool utc = false;  // show UTC; else this machine's local time
  TimeMs now = 0;    // ages are relative to this
};
// The client's clock and the --utc choice.
TimeStyle CurrentTimeStyle(bool utc);

// "2026-11-27 04:12:45 CET" from the API's "2026-11-27T03:12:45Z"; "" for "".
std::string ShowTime(const std::string& iso, const TimeStyle& style);
// "3m ago", "in 2h", "now"; "" for "".
std::string Age(const std::string& iso, const TimeStyle& style);
// A job's run time: started to ended, or to now while it runs; "" before its first start.
std::string Elapsed(const nlohmann::json& job, const TimeStyle& style);

// A --since/--until value as the API's UTC form: "now", a duration back from now ("2h",
// "3d"), a date or date and time (local, or UTC with `utc` or a trailing Z). Errors name
// `flag`.
Expected<std::string> ParseWhen(const std::string& flag, const std::string& text, const TimeStyle& style);

}  // namespace gantry
