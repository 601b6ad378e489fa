// The simulator's measure of team starvation (simulation.h): how long a team had jobs
// waiting and no GPU, in all, while a waiting job fit its guarantee, and while the GPU
// types it asked for allowed the starvation guard to act (sched/preemption_rules.cc: a
// rescue may take what other teams borrow, and work of other teams that keep GPUs of their
// own, so long as that work may be evicted at all).
#include <algorithm>
#include <map>

#include "sched/usage.h"
#include "sim/simulation.h"

namespace gantry::sim_internal {

// Per node, the GPUs a rescue could have now: idle ones, and those of running jobs it may
// evict: preemptible, of a preemptible class, evicted fewer than max_evictions times, of a
// team that either guarantees nothing (all it holds is borrowed: the reclaim rule) or keeps
// GPUs after (the starvation rule never takes a team's last GPUs; when all a team holds
// could go, its smallest such job is left out). Shared GPUs are not counted.
void Simulation::CountRescuable() {
  CountIdle();
  UsageTracker usage(snap_, config_.catalog, options_.quotas);
  std::map<int, std::vector<size_t>> evictable;  // team -> its running jobs a rule may take
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    if (r.placement.sharing != SharingMode::kExclusive || !r.spec->preemptible ||
        r.evictions >= policy_.max_evictions) {
      continue;
    }
    const int c = policy_.FindClass(r.spec->priority_class);
    if (c >= 0 && !policy_.priority_classes[c].preemptible) continue;
    evictable[jobs_[running_job_[i]].team].push_back(i);
  }
  for (auto& [team, running] : evictable) {
    const double held = team_alloc_[team];
    double could_go = 0;
    for (size_t i : running) could_go += jobs_[running_job_[i]].share;
    const bool guarantees_nothing = usage.Borrowed(teams_[team]) >= held - 1e-9;
    if (!guarantees_nothing && could_go >= held - 1e-9) {
      auto smallest = std::min_element(running.begin(), running.end(), [&](size_t a, size_t b) {
        return jobs_[running_job_[a]].share < jobs_[running_job_[b]].share;
      });
      running.erase(smallest);
    }
    for (size_t i : running) {
      for (const NodeShare& ns : snap_.running[i].placement.nodes)
        node_idle_[ns.node] += static_cast<int>(ns.gpus.size());
    }
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
