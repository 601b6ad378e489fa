// Prometheus text exposition, hand-written (Debian 12 has no prometheus-cpp): counters,
// gauges and cumulative histograms with labels, rendered in the text format 0.0.4.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gantry {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A histogram with fixed upper bounds (seconds), as Prometheus clients keep them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double v);
  // Estimated quantile from the buckets (upper bound of the bucket holding it).
  double Quantile(double q) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Latency buckets from 0.5 ms to 60 s.
std::vector<double> LatencyBuckets();

// Builds one exposition: HELP and TYPE once per family, then its samples.
class MetricsWriter {
 public:
  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  void Write(const std::string& name, const std::string& help, const Histogram& h, const Labels& labels = {});
  std::string str() && { return std::move(out_); }

 private:
  std::string out_;
};

// gantry_leader (1 on the server that schedules and writes, 0 on a standby),
// gantry_leader_term and gantry_leader_takeovers_total: the same families on a leader and a
// standby, so one alert rule covers both.
void WriteLeadershipMetrics(MetricsWriter& w, bool leader, int64_t term, int64_t takeovers);

// Escapes a label value (backslash, quote, newline).
std::string EscapeLabel(const std::string& v);

}  // namespace gantry
