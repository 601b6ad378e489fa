// The teams' clocks the engine's fairness rules read, one copy for the live server and the
// simulator: since when each team has had work waiting and no GPU (starving: the
// starvation bound), and work waiting while it holds less than its guarantee (below:
// reclaim_after, then reclaim_patience). Both are kept across cycles by the caller's
// TeamClocks and handed to the engine in the snapshot.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/quota_config.h"
#include "core/scheduler_config.h"
#include "sched/plan.h"

namespace gantry {

// A team with jobs waiting, as it stands at a cycle.
struct WaitingTeam {
  double held_gpus = 0;        // GPU shares its running jobs hold
  double guaranteed_gpus = 0;  // its quota's guarantee (0: none)
};

// The equal share of unlisted teams (QuotaConfig::EqualShare) over the GPUs of `nodes` that
// take work, among the teams in `teams_with_work` (jobs waiting or running) the quotas do
// not list. The live server and the simulator both call it before each cycle.
double EqualShareNow(const QuotaConfig& quotas, const std::vector<Node>& nodes,
                     const std::set<std::string>& teams_with_work);

class TeamClocks {
 public:
  // The teams with jobs waiting at `now`, before the cycle's starts; every other team's
  // clocks stop.
  void Update(TimeMs now, const std::map<std::string, WaitingTeam>& waiting);
  // A job work was evicted for (nominated) left the queue without starting (cancelled,
  // held): if its team is starving, its starvation clock restarts at `now`, so the next
  // rescue needs another whole bound. Else a team past the bound could evict others again
  // and again by submitting and cancelling, holding nothing itself.
  void Withdrawn(const std::string& team, TimeMs now);
  // Copies the clocks into the snapshot the engine plans from.
  void CopyTo(Snapshot& snap) const;
  // The first instant after `now` at which the engine's plan may change with no arrival or
  // end, or kNever: a running clock reaches a threshold the engine acts on (the starvation
  // bound; reclaim_after and reclaim_after + reclaim_patience when preemption reclaims
  // guarantees), or, while a clock is past one (a rescue or reclaim may be waiting for a
  // victim), one of the `running` jobs reaches min_runtime and may be evicted. The live
  // server's one-second tick notices these by itself; a clock-driven simulation wakes there.
  TimeMs NextThreshold(const SchedulerConfig& config, TimeMs now, const std::vector<RunningJob>& running) const;

 private:
  std::map<std::string, TimeMs> starving_since_;
  std::map<std::string, TimeMs> below_since_;
};

}  // namespace gantry
