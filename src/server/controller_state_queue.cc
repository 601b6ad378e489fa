// The controller's pending queue, kept in order across cycles so a cycle over a long
// queue costs what changed, not a sort of everything: new and requeued jobs wait in an
// unordered tail, get their keys and are merged in at the next cycle; every
// recalc_period (or after a quota change, or when a team's guarantee tier moved) all keys
// are recomputed and the queue re-sorted, as the simulator does.
#include <algorithm>

#include "sched/usage.h"
#include "server/controller_state.h"

namespace gantry {

QueueContext ControllerState::Context() const {
  int largest = 0;
  for (const Node& n : snap_.nodes) largest = std::max(largest, static_cast<int>(n.gpus.size()));
  const SchedulerConfig& config = options_.config.scheduler;
  return {config, snap_.now_ms, largest, config.fairshare_weight != 0 ? &factors_ : nullptr, &guarantee_levels_};
}

void ControllerState::Reorder() {
  const SchedulerConfig& config = options_.config.scheduler;
  factors_ = FairShareFactors(snap_.team_usage, *quotas_);
  guarantee_levels_ = UsageTracker(snap_, options_.config.catalog, *quotas_)
                          .GuaranteeLevels(snap_.below_guarantee_since, snap_.now_ms, config.reclaim_after_ms);
  std::vector<QueueEntry> order = OrderQueue(snap_.pending, Context());
  std::vector<PendingJob> pending;
  pending.reserve(order.size());
  for (QueueEntry& e : order) pending.push_back(std::move(snap_.pending[e.pending_index]));
  snap_.pending = std::move(pending);
  pending_keys_ = std::move(order);
  ordered_ = snap_.pending.size();
  last_reorder_ = snap_.now_ms;
  keyed_tiers_ = GuaranteeTiers(snap_.below_guarantee_since, snap_.now_ms, config.reclaim_after_ms);
}

void ControllerState::OrderPending(bool force_reorder) {
  if (force_reorder || last_reorder_ < 0 ||
      snap_.now_ms - last_reorder_ >= options_.config.scheduler.recalc_period_ms) {
    Reorder();
    return;
  }
  if (ordered_ == snap_.pending.size()) return;
  // Key and sort the tail, then merge it with the ordered prefix. The tail's keys take
  // their age as of the last reorder, like the prefix's: keyed at a later "now", a job
  // merged a few ms after another would count those ms as age and pass older equal jobs.
  QueueContext ctx = Context();
  ctx.now_ms = last_reorder_;
  std::vector<QueueEntry> tail;
  for (size_t i = ordered_; i < snap_.pending.size(); ++i) tail.push_back(MakeQueueEntry(snap_.pending, i, ctx));
  std::sort(tail.begin(), tail.end(),
            [&](const QueueEntry& a, const QueueEntry& b) { return QueueBefore(a, b, snap_.pending); });
  std::vector<PendingJob> pending;
  std::vector<QueueEntry> keys;
  // Room for the next arrivals, so pushing them does not copy the whole queue again.
  size_t room = snap_.pending.size() + snap_.pending.size() / 4 + 64;
  pending.reserve(room);
  keys.reserve(room);
  size_t a = 0, b = 0;
  while (a < ordered_ || b < tail.size()) {
    bool take_tail =
        a == ordered_ || (b < tail.size() && QueueKeyBefore(tail[b], snap_.pending[tail[b].pending_index].spec->id,
                                                            pending_keys_[a], snap_.pending[a].spec->id));
    if (take_tail) {
      keys.push_back(tail[b]);
      pending.push_back(std::move(snap_.pending[tail[b++].pending_index]));
    } else {
      keys.push_back(pending_keys_[a]);
      pending.push_back(std::move(snap_.pending[a++]));
    }
  }
  snap_.pending = std::move(pending);
  pending_keys_ = std::move(keys);
  ordered_ = snap_.pending.size();
}

void ControllerState::Nominate(const std::string& id) {
  for (size_t i = 0; i < snap_.pending.size(); ++i) {
    if (snap_.pending[i].spec->id != id || snap_.pending[i].nominated) continue;
    MoveToTail(i).nominated = true;  // first in its class: its key changes
    return;
  }
}

PendingJob& ControllerState::MoveToTail(size_t i) {
  PendingJob job = std::move(snap_.pending[i]);
  snap_.pending.erase(snap_.pending.begin() + static_cast<std::ptrdiff_t>(i));
  if (i < ordered_) {
    pending_keys_.erase(pending_keys_.begin() + static_cast<std::ptrdiff_t>(i));
    --ordered_;
  }
  snap_.pending.push_back(std::move(job));
  return snap_.pending.back();
}

void ControllerState::RemovePending(const std::string& id) { RemovePending(std::set<std::string>{id}); }

void ControllerState::RemovePending(const std::set<std::string>& ids) {
  if (ids.empty()) return;
  // One pass keeping the order (and the keys of the ordered part): a whole array at once.
  size_t kept = 0, kept_ordered = 0;
  for (size_t i = 0; i < snap_.pending.size(); ++i) {
    if (ids.count(snap_.pending[i].spec->id)) continue;
    if (i < ordered_) pending_keys_[kept_ordered++] = pending_keys_[i];
    if (kept != i) snap_.pending[kept] = std::move(snap_.pending[i]);
    ++kept;
  }
  snap_.pending.resize(kept);
  pending_keys_.resize(kept_ordered);
  ordered_ = kept_ordered;
}

// ApplyPlan removes started jobs from snap_.pending keeping the order; the keys follow.
void ControllerState::DropStarted(const Plan& plan) {
  std::vector<bool> started(pending_keys_.size(), false);
  for (const StartDecision& s : plan.starts) started[s.pending_index] = true;
  size_t kept = 0;
  for (size_t i = 0; i < pending_keys_.size(); ++i) {
    if (!started[i]) pending_keys_[kept++] = pending_keys_[i];
  }
  pending_keys_.resize(kept);
  ordered_ = kept;
}

}  // namespace gantry
