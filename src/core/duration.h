// Durations as people write them: units ("90s", "15m", "2h", "1d", "1h30m", "250ms") and
// Slurm's clock forms ("MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS").
#pragma once

#include <string>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

// The longest duration accepted anywhere (about 31 years): beyond it is a typo.
constexpr DurationMs kMaxDurationMs = 1'000'000'000'000;

// Parses a duration; a bare number counts in `bare_unit` (seconds in configuration files,
// minutes where a job's time is written, as in Slurm). Errors carry no field: callers
// name it.
Expected<DurationMs> ParseDuration(const std::string& text, DurationMs bare_unit = kSecondMs);

// A job's time as written in a job file, on the command line or in a jobs file: a bare
// number is minutes (Slurm's -t 30).
inline Expected<DurationMs> ParseJobTime(const std::string& text) { return ParseDuration(text, kMinuteMs); }

}  // namespace gantry
