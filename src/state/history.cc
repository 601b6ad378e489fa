// Bucketed averages of the stored cluster samples (see history.h).
#include "state/history.h"

#include <map>

namespace gantry {

Expected<HistoryRange> ParseHistoryRange(const std::string& range, TimeMs now) {
  constexpr DurationMs kMinute = 60 * 1000, kHour = 60 * kMinute, kDay = 24 * kHour;
  static const std::map<std::string, std::pair<DurationMs, DurationMs>> kRanges = {{"1h", {kHour, kMinute}},
                                                                                   {"24h", {kDay, 5 * kMinute}},
                                                                                   {"7d", {7 * kDay, kHour}},
                                                                                   {"30d", {30 * kDay, 4 * kHour}}};
  auto it = kRanges.find(range.empty() ? "24h" : range);
  if (it == kRanges.end()) return Status::Invalid("range", "must be 1h, 24h, 7d or 30d");
  auto [span, step] = it->second;
  TimeMs to = (now / step + 1) * step;  // the bucket now is in is the last one
  return HistoryRange{to - span, to, step};
}

nlohmann::json HistorySeries(const std::vector<HistoryRow>& rows, const HistoryRange& range) {
  struct Bucket {
    int samples = 0;
    double total = 0, allocated = 0, unavailable = 0, queued = 0, running = 0;
    int util_samples = 0;
    double util = 0;
  };
  std::map<TimeMs, Bucket> buckets;
  for (const HistoryRow& row : rows) {
    if (row.ts_ms < range.from || row.ts_ms >= range.to) continue;
    nlohmann::json doc = nlohmann::json::parse(row.doc, nullptr, false);
    if (!doc.is_object()) continue;
    Bucket& b = buckets[range.from + (row.ts_ms - range.from) / range.step_ms * range.step_ms];
    b.samples++;
    b.total += doc.value("gpus_total", 0.0);
    b.allocated += doc.value("gpus_allocated", 0.0);
    b.unavailable += doc.value("gpus_unavailable", 0.0);
    b.queued += doc.value("queued", 0.0);
    b.running += doc.value("running", 0.0);
    if (doc.contains("gpu_util_pct") && doc["gpu_util_pct"].is_number()) {
      b.util_samples++;
      b.util += doc["gpu_util_pct"].get<double>();
    }
  }
  auto round2 = [](double v) { return static_cast<double>(static_cast<int64_t>(v * 100 + 0.5)) / 100; };
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [t, b] : buckets) {
    double n = b.samples;
    nlohmann::json p = {{"t", FormatUtc(t)},
                        {"gpus_total", round2(b.total / n)},
                        {"gpus_allocated", round2(b.allocated / n)},
                        {"gpus_unavailable", round2(b.unavailable / n)},
                        {"utilization", b.total > 0 ? round2(b.allocated / b.total * 100) / 100 : 0.0},
                        {"queued", round2(b.queued / n)},
                        {"running", round2(b.running / n)},
                        {"gpu_util_pct", nullptr}};
    if (b.util_samples > 0) p["gpu_util_pct"] = round2(b.util / b.util_samples);
    points.push_back(std::move(p));
  }
  return {{"from", FormatUtc(range.from)},
          {"to", FormatUtc(range.to)},
          {"step_s", range.step_ms / 1000},
          {"points", std::move(points)}};
}

}  // namespace gantry
