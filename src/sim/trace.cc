// Trace parsing: Philly and Gantry CSV.
#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "core/sharing_config.h"

namespace gantry {

bool SplitCsvLine(const std::string& line, std::vector<std::string>* fields) {
  fields->clear();
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields->push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  fields->push_back(std::move(cur));
  return !quoted;
}

namespace {

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && std::isfinite(*out);
}

bool ParseInt(const std::string& s, int64_t* out) {
  double d = 0;
  if (!ParseDouble(s, &d) || d != std::floor(d) || std::fabs(d) > 9e15) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// Seconds as a number, or an ISO-8601 UTC time ("2017-10-03 14:00:00", "...T...Z").
bool ParseSubmitTime(const std::string& s, TimeMs* out) {
  double secs = 0;
  if (ParseDouble(s, &secs)) {
    *out = static_cast<TimeMs>(std::llround(secs * 1000));
    return secs >= 0;
  }
  return ParseUtc(s, out);
}

bool ParseBool(const std::string& s, bool* out) {
  if (s == "1" || s == "true" || s == "yes") return *out = true, true;
  if (s == "0" || s == "false" || s == "no") return *out = false, true;
  return false;
}

using Row = std::vector<std::string>;
using Columns = std::map<std::string, size_t>;

// Parses one data row into `job`; an empty string means success, else the reason.
std::string ParsePhillyRow(const Row& row, const Columns& cols, TraceJob* job) {
  auto get = [&](const char* name) -> const std::string& { return row[cols.at(name)]; };
  if (!ParseUtc(get("timestamp"), &job->submit_ms)) return "timestamp: not a 'YYYY-MM-DD HH:MM:SS' time";
  double duration = 0;
  if (!ParseDouble(get("duration"), &duration) || duration < 0) return "duration: not a number of seconds >= 0";
  int64_t gpus = 0;
  if (!ParseInt(get("num_gpus"), &gpus) || gpus < 1 || gpus > 65536) return "num_gpus: not a whole number in 1..65536";
  job->duration_ms = static_cast<DurationMs>(std::llround(duration * 1000));
  job->spec.request.gpus = static_cast<int>(gpus);
  job->spec.team = get("cluster");
  if (job->spec.team.empty()) return "cluster: empty";
  job->spec.user = job->spec.team;
  return "";
}

std::string ParseCsvRow(const Row& row, const Columns& cols, TraceJob* job) {
  auto has = [&](const char* name) { return cols.count(name) && !row[cols.at(name)].empty(); };
  auto get = [&](const char* name) -> const std::string& { return row[cols.at(name)]; };
  JobSpec& s = job->spec;
  GpuRequest& r = s.request;
  if (!ParseSubmitTime(get("submit_time"), &job->submit_ms)) return "submit_time: not seconds or an ISO-8601 time";
  double duration = 0;
  if (!ParseDouble(get("duration_s"), &duration) || duration < 0) return "duration_s: not a number of seconds >= 0";
  job->duration_ms = static_cast<DurationMs>(std::llround(duration * 1000));
  int64_t gpus = 0;
  if (!ParseInt(get("num_gpus"), &gpus) || gpus < 1 || gpus > 65536) return "num_gpus: not a whole number in 1..65536";
  r.gpus = static_cast<int>(gpus);
  if (has("gpu_fraction") || has("gpu_milli")) {
    double f = 0;
    if (has("gpu_fraction")) {
      if (!ParseDouble(get("gpu_fraction"), &f) || f <= 0 || f > 1) return "gpu_fraction: not in (0, 1]";
    } else {
      if (!ParseDouble(get("gpu_milli"), &f) || f <= 0 || f > 1000) return "gpu_milli: not in 1..1000";
      f /= 1000;
    }
    if (f < 1 || r.gpus == 1) {
      if (r.gpus != 1) return "gpu_fraction: a fraction needs num_gpus 1";
      r.sharing = SharingMode::kAuto;  // the cluster's sharing settings decide, as for a submit
      if (has("sharing") && !ParseFractionSharing(get("sharing"), &r.sharing)) {
        return "sharing: not auto, mps or time-slice";
      }
      r.gpu_milli = static_cast<int32_t>(std::lround(f * 1000));
      if (r.gpu_milli == kMilliPerGpu) r.sharing = SharingMode::kExclusive, r.gpu_milli = 0;
    }
  }
  if (has("mig_profile")) {
    if (r.sharing != SharingMode::kExclusive || r.gpus != 1) return "mig_profile: needs num_gpus 1 and no fraction";
    r.sharing = SharingMode::kMig;
    r.mig_profile = get("mig_profile");
  }
  if (has("gpu_types")) {
    std::stringstream ss(get("gpu_types"));
    std::string t;
    while (std::getline(ss, t, '|')) {
      if (!t.empty()) r.gpu_types.push_back(t);
    }
  }
  if (has("num_nodes")) {
    int64_t nodes = 0;
    if (!ParseInt(get("num_nodes"), &nodes) || nodes < 0 || nodes > 4096) return "num_nodes: not in 0..4096";
    r.num_nodes = static_cast<int>(nodes);
  }
  if (has("id")) s.id = get("id");
  s.team = has("team") ? get("team") : "default";
  s.user = has("user") ? get("user") : s.team;
  if (has("project")) s.project = get("project");
  if (has("priority")) s.priority_class = get("priority");
  if (has("preemptible") && !ParseBool(get("preemptible"), &s.preemptible)) return "preemptible: not true/false";
  auto seconds = [&](const char* name, DurationMs* out) -> bool {
    if (!has(name)) return true;
    double v = 0;
    if (!ParseDouble(get(name), &v) || v < 0) return false;
    *out = static_cast<DurationMs>(std::llround(v * 1000));
    return true;
  };
  if (!seconds("checkpoint_interval_s", &job->checkpoint_interval_ms)) return "checkpoint_interval_s: not seconds >= 0";
  if (!seconds("estimated_duration_s", &s.estimated_duration_ms)) return "estimated_duration_s: not seconds >= 0";
  if (!seconds("time_limit_s", &s.time_limit_ms)) return "time_limit_s: not seconds >= 0";
  s.checkpointable = job->checkpoint_interval_ms > 0;
  return "";
}

}  // namespace

Expected<Trace> ParseTrace(const std::string& text, TraceFormat format, bool strict) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  Row header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    if (!SplitCsvLine(line, &header))
      return Status::Invalid("trace", fmt::format("line {}: unterminated quote", line_no));
  }
  Columns cols;
  for (size_t i = 0; i < header.size(); ++i) cols[header[i]] = i;
  std::vector<const char*> required = format == TraceFormat::kPhilly
                                          ? std::vector<const char*>{"timestamp", "duration", "num_gpus", "cluster"}
                                          : std::vector<const char*>{"submit_time", "duration_s", "num_gpus"};
  for (const char* c : required) {
    if (!cols.count(c)) return Status::Invalid("trace", fmt::format("line {}: header lacks column '{}'", line_no, c));
  }
  Trace trace;
  Row row;
  int index = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    std::string why;
    TraceJob job;
    if (!SplitCsvLine(line, &row)) {
      why = "unterminated quote";
    } else if (row.size() != header.size()) {
      why = fmt::format("{} fields, the header has {}", row.size(), header.size());
    } else {
      why = format == TraceFormat::kPhilly ? ParsePhillyRow(row, cols, &job) : ParseCsvRow(row, cols, &job);
    }
    if (!why.empty()) {
      if (strict) return Status::Invalid("trace", fmt::format("line {}: {}", line_no, why));
      trace.skipped.push_back({line_no, why});
      continue;
    }
    if (job.spec.id.empty()) job.spec.id = fmt::format("t{}", index);
    ++index;
    trace.jobs.push_back(std::move(job));
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_ms < b.submit_ms; });
  return trace;
}

Expected<Trace> LoadTrace(const std::string& path, TraceFormat format, bool strict) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read trace " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseTrace(buf.str(), format, strict);
}

}  // namespace gantry
