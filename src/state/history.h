// The dashboard's history of the cluster: the controller stores one sample a minute (GPUs by
// type, allocated, unavailable, measured utilization, queue and running jobs), and reads
// them back averaged in buckets, so a day or a week is a few hundred points and the page
// works without Prometheus.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "state/store_records.h"

namespace gantry {

constexpr DurationMs kHistoryKeepMs = 35LL * 24 * 3600 * 1000;  // a month and a margin

struct HistoryRange {
  TimeMs from = 0;
  TimeMs to = 0;
  DurationMs step_ms = 0;  // bucket width
};

// "1h" (1-minute buckets), "24h" (5-minute buckets), "7d" (1-hour buckets) or "30d" (4-hour buckets), ending now;
// anything else is refused naming `range`.
Expected<HistoryRange> ParseHistoryRange(const std::string& range, TimeMs now);

// {"from", "to", "step_s", "points": [{"t", "gpus_total", "gpus_allocated",
// "gpus_unavailable", "utilization", "gpu_util_pct", "queued", "running"}]}: the mean of
// each bucket's samples (buckets without one are left out; gpu_util_pct null when no GPU
// reported telemetry in the bucket).
nlohmann::json HistorySeries(const std::vector<HistoryRow>& rows, const HistoryRange& range);

}  // namespace gantry
