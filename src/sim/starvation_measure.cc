// The simulator's measure of team starvation (simulation.h): how long a team had jobs
// waiting and no GPU, in all, while a waiting job fit its guarantee, and while the GPU
// types it asked for allowed the starvation guard to act (sched/preemption_rules.cc: a
// rescue may take work of other teams that keep GPUs of their own, so long as that work
// may be evicted at all).
#include "sched/usage.h"
#include "sim/simulation.h"

namespace gantry::sim_internal {

// Per node, the GPUs a rescue could have now: idle ones, and those of running jobs it may
// evict: preemptible, of a preemptible class, evicted fewer than max_evictions times, and
// either held above their team's guarantee (the reclaim rule) or of a team that keeps GPUs
// after (the starvation rule). Shared GPUs are not counted.
void Simulation::CountRescuable() {
  CountIdle();
  UsageTracker usage(snap_, config_.catalog, options_.quotas);
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    const JobState& js = jobs_[running_job_[i]];
    if (r.placement.sharing != SharingMode::kExclusive || !r.spec->preemptible ||
        r.evictions >= policy_.max_evictions) {
      continue;
    }
    const bool borrowed = usage.Borrowed(r.spec->team) >= js.share - 1e-9;
    if (!borrowed && team_alloc_[js.team] <= js.share + 1e-9) continue;
    const int c = policy_.FindClass(r.spec->priority_class);
    if (c >= 0 && !policy_.priority_classes[c].preemptible) continue;
    for (const NodeShare& ns : r.placement.nodes) node_idle_[ns.node] += static_cast<int>(ns.gpus.size());
  }
}

// A team starves while it has a job waiting and no GPU allocated (the longest such wait is
// the starvation bound's measure); `fit`: counting only jobs within its guarantee;
// `allowed`: only while a rescue could have started one of its jobs.
void Simulation::MeasureStarvation(TimeMs t) {
  bool counted = false;
  for (size_t k = 0; k < teams_.size(); ++k) {
    auto track = [&](bool starving, TimeMs& since, double& max_ms) {
      if (starving && since < 0) since = t;
      if (!starving && since >= 0) {
        max_ms = std::max(max_ms, static_cast<double>(t - since));
        since = -1;
      }
    };
    const bool starving = team_waiting_[k] > 0 && team_alloc_[k] < 1e-9;
    track(starving, starve_since_[k], team_max_starve_ms_[k]);
    track(team_waiting_fit_[k] > 0 && team_alloc_[k] < 1e-9, starve_fit_since_[k], team_max_starve_fit_ms_[k]);
    bool allowed = false;
    if (starving) {
      if (!counted) CountRescuable();
      counted = true;
      allowed = team_shapes_[k].Count(node_types_, node_idle_) > 0;
    }
    track(allowed, starve_allowed_since_[k], team_max_starve_allowed_ms_[k]);
  }
}

}  // namespace gantry::sim_internal
