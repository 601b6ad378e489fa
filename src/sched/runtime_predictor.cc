// RuntimePredictor: recent run times per (user, name or command, GPU count), and how far
// each user's estimates have been off.
#include "sched/runtime_predictor.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gantry {

namespace {

template <typename T>
void PushBounded(std::deque<T>& q, T v, size_t window) {
  q.push_back(v);
  while (q.size() > window) q.pop_front();
}

std::string GpuKey(const JobSpec& spec) {
  const GpuRequest& r = spec.request;
  if (!r.mig_profile.empty()) return "mig:" + r.mig_profile;
  if (r.fractional()) return "milli:" + std::to_string(r.gpu_milli);
  return "gpus:" + std::to_string(r.gpus);
}

}  // namespace

std::string RuntimePredictor::KeyOf(const JobSpec& spec, bool by_name) {
  std::string key = spec.user + '\x1f' + GpuKey(spec);
  if (!by_name) return key;
  return key + '\x1f' + (spec.name.empty() ? "cmd:" + spec.command : "name:" + spec.name);
}

void RuntimePredictor::Observe(const JobSpec& spec, DurationMs ran_ms) {
  if (ran_ms <= 0) return;
  PushBounded(runs_[KeyOf(spec, true)], ran_ms, options_.window);
  PushBounded(runs_[KeyOf(spec, false)], ran_ms, options_.window);
  if (spec.estimated_duration_ms > 0) {
    double ratio = static_cast<double>(ran_ms) / static_cast<double>(spec.estimated_duration_ms);
    PushBounded(misses_[spec.user], std::max(ratio, 1.0 / ratio), options_.window);
  }
}

bool RuntimePredictor::EstimatesPoor(const std::string& user) const {
  auto it = misses_.find(user);
  if (it == misses_.end() || it->second.size() < options_.min_samples) return false;
  std::vector<double> m(it->second.begin(), it->second.end());
  std::nth_element(m.begin(), m.begin() + m.size() / 2, m.end());
  return m[m.size() / 2] > options_.poor_estimate_factor;
}

DurationMs RuntimePredictor::Percentile(const std::deque<DurationMs>& runs) const {
  std::vector<DurationMs> v(runs.begin(), runs.end());
  size_t k = std::min(v.size() - 1, static_cast<size_t>(std::floor(options_.percentile * (v.size() - 1) + 0.5)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

DurationMs RuntimePredictor::Predict(const JobSpec& spec) const {
  if (spec.estimated_duration_ms > 0 && !EstimatesPoor(spec.user)) return -1;
  for (bool by_name : {true, false}) {
    auto it = runs_.find(KeyOf(spec, by_name));
    if (it == runs_.end() || it->second.size() < options_.min_samples) continue;
    DurationMs p = Percentile(it->second);
    return spec.time_limit_ms > 0 ? std::min(p, spec.time_limit_ms) : p;
  }
  return -1;
}

}  // namespace gantry
