// The controller's pending queue and team clocks: one copy with the simulator's
// (sched/ordered_queue.h, sched/team_clocks.h); here only what the controller feeds them.
#include <algorithm>
#include <set>

#include "sched/usage.h"
#include "state/controller_state.h"

namespace gantry {

QueuePolicy ControllerState::QueuePolicyNow() const {
  int largest = 0;
  for (const Node& n : snap_.nodes) largest = std::max(largest, static_cast<int>(n.gpus.size()));
  return {options_.config.scheduler, options_.config.catalog, *quotas_, largest};
}

void ControllerState::OrderPending() { queue_.Order(snap_, QueuePolicyNow()); }

void ControllerState::MergeNewPending() { queue_.MergeNew(snap_.pending, QueuePolicyNow()); }

void ControllerState::UpdateTeamClocks() {
  std::map<std::string, WaitingTeam> waiting;  // teams with jobs in the queue
  for (const PendingJob& p : snap_.pending) waiting.try_emplace(p.spec->team);
  if (quotas_->SharesEqually()) {
    std::set<std::string> with_work;
    for (const auto& [team, standing] : waiting) with_work.insert(team);
    for (const RunningJob& r : snap_.running) with_work.insert(r.spec->team);
    snap_.equal_share = EqualShareNow(*quotas_, snap_.nodes, with_work);
  } else {
    snap_.equal_share = 0;
  }
  if (!waiting.empty()) {
    UsageTracker usage(snap_, options_.config.catalog, *quotas_);
    for (auto& [team, standing] : waiting) {
      standing.held_gpus = usage.TeamTotal(team);
      standing.guaranteed_gpus = usage.Guarantee(team);
    }
  }
  team_clocks_.Update(snap_.now_ms, waiting);
  team_clocks_.CopyTo(snap_);
}

void ControllerState::RemovePending(const std::string& id) { RemovePending(std::set<std::string>{id}); }

void ControllerState::RemovePending(const std::set<std::string>& ids) {
  for (const PendingJob& p : snap_.pending) {
    if (p.nominated && ids.count(p.spec->id)) team_clocks_.Withdrawn(p.spec->team, now_);
  }
  queue_.Remove(snap_.pending, ids);
  team_clocks_.CopyTo(snap_);
}

}  // namespace gantry
