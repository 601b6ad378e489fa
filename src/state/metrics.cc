// Prometheus text format rendering.
#include "state/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gantry {

void Histogram::Observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i]++;
  count_++;
  sum_ += v;
}

double Histogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return i < bounds_.size() ? bounds_[i] : INFINITY;
  }
  return INFINITY;
}

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025,
          0.05,   0.1,   0.25,  0.5,   1,     2.5,   5,      10,   30,    60};
}

std::string EscapeLabel(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::string FormatLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += fmt::format("{}=\"{}\"", labels[i].first, EscapeLabel(labels[i].second));
  }
  return out + "}";
}

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

}  // namespace

void MetricsWriter::Family(const std::string& name, const std::string& type, const std::string& help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void MetricsWriter::Sample(const std::string& name, const Labels& labels, double value) {
  out_ += fmt::format("{}{} {}\n", name, FormatLabels(labels), FormatValue(value));
}

void MetricsWriter::Write(const std::string& name, const std::string& help, const Histogram& h, const Labels& labels) {
  Family(name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    Labels l = labels;
    l.emplace_back("le", i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf");
    Sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  Sample(name + "_sum", labels, h.sum());
  Sample(name + "_count", labels, static_cast<double>(h.count()));
}

void WriteLeadershipMetrics(MetricsWriter& w, bool leader, int64_t term, int64_t takeovers) {
  w.Family("gantry_leader", "gauge", "1 on the server that schedules and writes, 0 on a standby");
  w.Sample("gantry_leader", {}, leader ? 1 : 0);
  w.Family("gantry_leader_term", "gauge", "The leader's term on a shared PostgreSQL store (0 on SQLite)");
  w.Sample("gantry_leader_term", {}, static_cast<double>(term));
  w.Family("gantry_leader_takeovers_total", "counter",
           "Times the leadership passed from one server to another (cluster-wide, from the store)");
  w.Sample("gantry_leader_takeovers_total", {}, static_cast<double>(takeovers));
}

}  // namespace gantry
