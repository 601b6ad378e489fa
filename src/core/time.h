// Time as integer milliseconds since the Unix epoch, and helpers to print it. The engine
// never reads a clock: callers pass "now" in, so the same input always gives the same plan.
#pragma once

#include <cstdint>
#include <string>

namespace gantry {

using TimeMs = int64_t;      // milliseconds since 1970-01-01T00:00:00Z
using DurationMs = int64_t;  // a span of milliseconds

constexpr DurationMs kSecondMs = 1000;
constexpr DurationMs kMinuteMs = 60 * kSecondMs;
constexpr DurationMs kHourMs = 60 * kMinuteMs;
constexpr TimeMs kNever = INT64_MAX;

// "2026-11-26T14:20:00Z" (UTC, seconds precision).
std::string FormatUtc(TimeMs t);
// Parses "2026-11-26T14:20:00Z" (or with a space for T, Z optional: UTC); false if malformed.
bool ParseUtc(const std::string& text, TimeMs* out);
// "1h05m", "42s", "3d02h": a compact human duration.
std::string FormatDuration(DurationMs d);

}  // namespace gantry
