// What the dashboard reads besides the plain views: a cluster sample for the stored history
// (taken in Tick, once a history interval has passed) and each team's jobs and GPUs against
// its guarantee and limits.
#include <fmt/format.h>

#include "sched/apply_plan.h"
#include "sched/usage.h"
#include "state/controller_state.h"
#include "state/history.h"

namespace gantry {

void ControllerState::SampleHistory() {
  if (options_.history_interval_ms <= 0) return;
  if (last_history_ms_ >= 0 && now_ - last_history_ms_ < options_.history_interval_ms) return;
  last_history_ms_ = now_;
  ClusterStatus st = ComputeStatus(snap_, options_.config.catalog);
  double util_sum = 0;
  int util_gpus = 0;
  for (const auto& [node, gpus] : nodes_.readings()) {
    for (const auto& [index, reading] : gpus) {
      const auto& [sample, at] = reading;
      if (sample.util_pct < 0 || now_ - at > 5 * options_.history_interval_ms) continue;
      util_sum += sample.util_pct;
      ++util_gpus;
    }
  }
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [type, cap] : st.by_type) {
    by_type[type] = {{"total", cap.total}, {"allocated", cap.allocated}, {"unavailable", cap.unavailable}};
  }
  nlohmann::json doc = {{"gpus_total", st.total_gpus},
                        {"gpus_allocated", st.allocated_gpus},
                        {"gpus_unavailable", st.unavailable_gpus},
                        {"queued", st.queued + static_cast<int>(kept_out_.size())},
                        {"running", st.running},
                        {"by_type", by_type}};
  if (util_gpus > 0) doc["gpu_util_pct"] = util_sum / util_gpus;
  batch_.history.push_back({now_, doc.dump(-1, ' ', false, kReplaceBadUtf8)});
  batch_.history_drop_before_ms = now_ - kHistoryKeepMs;
}

}  // namespace gantry
