// The teams' starvation and below-guarantee clocks (team_clocks.h).
#include "sched/team_clocks.h"

#include <algorithm>

namespace gantry {

namespace {

constexpr double kNoGpu = 1e-9;  // shares below this are float residue, not a GPU

// Keeps `since[team]` running while `on`, starting it at `now`; stops it otherwise.
void Track(std::map<std::string, TimeMs>& since, const std::string& team, bool on, TimeMs now) {
  if (on) {
    since.emplace(team, now);
  } else {
    since.erase(team);
  }
}

}  // namespace

double EqualShareNow(const QuotaConfig& quotas, const std::vector<Node>& nodes,
                     const std::set<std::string>& teams_with_work) {
  if (!quotas.SharesEqually()) return 0;
  size_t unlisted = 0;
  for (const std::string& team : teams_with_work) unlisted += quotas.Lists(team) ? 0 : 1;
  if (unlisted == 0) return 0;
  double gpus = 0;
  for (const Node& n : nodes) gpus += n.schedulable() ? static_cast<double>(n.gpus.size()) : 0;
  return quotas.EqualShare(gpus, unlisted);
}

void TeamClocks::Update(TimeMs now, const std::map<std::string, WaitingTeam>& waiting) {
  auto stopped = [&](const auto& clock) { return !waiting.count(clock.first); };
  std::erase_if(starving_since_, stopped);
  std::erase_if(below_since_, stopped);
  for (const auto& [team, standing] : waiting) {
    Track(starving_since_, team, standing.held_gpus < kNoGpu, now);
    Track(below_since_, team, standing.held_gpus < standing.guaranteed_gpus - kNoGpu, now);
  }
}

void TeamClocks::Withdrawn(const std::string& team, TimeMs now) {
  if (auto it = starving_since_.find(team); it != starving_since_.end()) it->second = now;
}

void TeamClocks::CopyTo(Snapshot& snap) const {
  snap.starving_since = starving_since_;
  snap.below_guarantee_since = below_since_;
}

TimeMs TeamClocks::NextThreshold(const SchedulerConfig& config, TimeMs now,
                                 const std::vector<RunningJob>& running) const {
  TimeMs next = kNever;
  bool eviction_due = false;  // a clock is past a threshold at which the engine evicts
  auto consider = [&](TimeMs at, bool evicts) {
    if (at > now) next = std::min(next, at);
    eviction_due = eviction_due || (evicts && at <= now);
  };
  if (config.starvation_bound_ms > 0) {
    for (const auto& [team, since] : starving_since_) consider(since + config.starvation_bound_ms, true);
  }
  if (config.preemption_enabled && config.preempt_to_reclaim) {
    for (const auto& [team, since] : below_since_) {
      consider(since + config.reclaim_after_ms, true);
      consider(since + config.reclaim_after_ms + config.reclaim_patience_ms, false);
    }
  }
  if (eviction_due && config.preemption_enabled) {
    for (const RunningJob& r : running) {
      if (r.stop_at_ms == kNever && r.spec->preemptible && r.evictions < config.max_evictions) {
        consider(r.start_ms + config.min_runtime_ms, false);
      }
    }
  }
  return next;
}

}  // namespace gantry
