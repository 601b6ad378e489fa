// Workload traces for the simulator: the Philly format (traces/philly) and
// Gantry's own CSV (docs/SIMULATION.md). A malformed row is reported with its line number
// and reason; it is skipped and counted, or fatal with `strict`.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "core/time.h"

namespace gantry {

struct TraceJob {
  JobSpec spec;  // request, team, user, class, estimate, limit
  TimeMs submit_ms = 0;
  DurationMs duration_ms = 0;             // run time on the original hardware
  DurationMs checkpoint_interval_ms = 0;  // 0: no checkpoints (a preempted job restarts)
};

struct TraceIssue {
  int line = 0;
  std::string reason;
};

struct Trace {
  std::vector<TraceJob> jobs;       // sorted by submit time (stable)
  std::vector<TraceIssue> skipped;  // malformed rows
};

enum class TraceFormat { kPhilly, kCsv };

// Reads a trace file. With `strict`, the first malformed row is an error naming its line.
Expected<Trace> LoadTrace(const std::string& path, TraceFormat format, bool strict);
Expected<Trace> ParseTrace(const std::string& text, TraceFormat format, bool strict);

// Splits one CSV line (RFC 4180 quoting); false on an unterminated quote.
bool SplitCsvLine(const std::string& line, std::vector<std::string>* fields);

}  // namespace gantry
