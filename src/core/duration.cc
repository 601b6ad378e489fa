// Parsing of human durations: unit sums and Slurm's clock forms.
#include "core/duration.h"

#include <charconv>
#include <cmath>
#include <vector>

namespace gantry {

namespace {

const char kHelp[] = "use e.g. 90s, 15m, 2h, 1d, 1h30m, or Slurm's MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS";

Status Bad(const std::string& text, const std::string& why) {
  return Status::Invalid("", "bad duration '" + text + "': " + why + " (" + kHelp + ")");
}

// A run of digits as an integer; false if empty, not all digits or too long.
bool ReadCount(std::string_view digits, int64_t* out) {
  if (digits.empty() || digits.size() > 12) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return ec == std::errc() && end == digits.data() + digits.size();
}

// "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS".
Expected<DurationMs> ParseClock(const std::string& text) {
  std::string_view rest = text;
  int64_t days = 0;
  bool has_days = false;
  if (size_t dash = rest.find('-'); dash != std::string_view::npos) {
    if (!ReadCount(rest.substr(0, dash), &days)) return Bad(text, "days must be a whole number");
    has_days = true;
    rest.remove_prefix(dash + 1);
  }
  std::vector<int64_t> parts;
  while (true) {
    size_t colon = rest.find(':');
    int64_t v = 0;
    if (!ReadCount(rest.substr(0, colon), &v)) return Bad(text, "each part must be a whole number");
    parts.push_back(v);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (parts.size() > 3) return Bad(text, "too many ':' parts");
  // Without days: MM:SS or HH:MM:SS. With days: HH, HH:MM or HH:MM:SS.
  static const DurationMs kPlain[][3] = {{0}, {kMinuteMs, kSecondMs}, {kHourMs, kMinuteMs, kSecondMs}};
  static const DurationMs kWithDays[3] = {kHourMs, kMinuteMs, kSecondMs};
  double total = static_cast<double>(days) * 24 * static_cast<double>(kHourMs);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && parts[i] >= 60) return Bad(text, "minutes and seconds go up to 59");
    DurationMs unit = has_days ? kWithDays[i] : kPlain[parts.size() - 1][i];
    total += static_cast<double>(parts[i]) * static_cast<double>(unit);
  }
  if (total > static_cast<double>(kMaxDurationMs)) return Bad(text, "too long");
  return static_cast<DurationMs>(total);
}

// One number as written: digits with at most one '.'.
bool ReadNumber(std::string_view digits, double* out) {
  if (digits.empty() || digits.size() > 20 || digits.front() == '.' || digits.back() == '.') return false;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return ec == std::errc() && end == digits.data() + digits.size() && std::isfinite(*out);
}

}  // namespace

Expected<DurationMs> ParseDuration(const std::string& text, DurationMs bare_unit) {
  if (text.empty()) return Status::Invalid("", std::string("empty duration (") + kHelp + ")");
  if (text[0] == '-') return Bad(text, "a duration cannot be negative");
  if (text.find(':') != std::string::npos || text.find('-') != std::string::npos) return ParseClock(text);
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    double value = 0;
    if (!ReadNumber(std::string_view(text).substr(i, j - i), &value)) return Bad(text, "expected a number");
    DurationMs unit = bare_unit;
    if (j == text.size()) {
      if (i > 0) return Bad(text, "the last number has no unit");
    } else if (text.compare(j, 2, "ms") == 0) {
      unit = 1, j += 2;
    } else {
      switch (text[j++]) {
        case 's': unit = kSecondMs; break;
        case 'm': unit = kMinuteMs; break;
        case 'h': unit = kHourMs; break;
        case 'd': unit = 24 * kHourMs; break;
        default: return Bad(text, "unknown unit (use ms, s, m, h, d)");
      }
    }
    total += value * static_cast<double>(unit);
    if (total > static_cast<double>(kMaxDurationMs)) return Bad(text, "too long");
    i = j;
  }
  return static_cast<DurationMs>(std::llround(total));
}

}  // namespace gantry
