// The ordered pending queue (ordered_queue.h): re-keys when due, else merges the unordered
// tail into the ordered part with keys as of the last re-key.
#include "sched/ordered_queue.h"

#include <algorithm>

#include "sched/fair_share.h"
#include "sched/priority_factors.h"
#include "sched/usage.h"

namespace gantry {

namespace {

// Whether keys move with time or the teams' standing (a weighted factor that can move,
// priority_factors.h); when not, an order once made stands (the age term alone ranks by
// submit time at any instant) and is never recomputed.
bool KeysChangeOverTime(const QueuePolicy& policy) {
  const bool guarantees = !policy.quotas.teams.empty() || policy.quotas.default_team.guaranteed_total() > 0 ||
                          policy.quotas.SharesEqually();
  for (const PriorityFactor& f : PriorityFactors()) {
    if (policy.config.*f.weight == 0) continue;
    if (f.moves == FactorMoves::kOverTime || (f.moves == FactorMoves::kWithGuarantees && guarantees)) return true;
  }
  return false;
}

// Drops the entries `drop(i)` names in one pass (a whole array at once), keeping the
// others' order and the ordered part's keys.
template <typename Drop>
void DropEntries(std::vector<PendingJob>& pending, std::vector<QueueEntry>& keys, Drop drop) {
  size_t kept = 0, kept_ordered = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (drop(i)) continue;
    if (i < keys.size()) keys[kept_ordered++] = keys[i];
    if (kept != i) pending[kept] = std::move(pending[i]);
    ++kept;
  }
  pending.resize(kept);
  keys.resize(kept_ordered);
}

}  // namespace

QueueContext OrderedQueue::Context(const QueuePolicy& policy, TimeMs now) const {
  return {policy.config, now, policy.largest_node_gpus, policy.config.ReadsFairShare() ? &fair_share_ : nullptr,
          &guarantee_levels_};
}

bool OrderedQueue::RekeyDue(const Snapshot& snap, const QueuePolicy& policy) const {
  if (last_rekey_ms_ < 0) return true;
  if (!KeysChangeOverTime(policy)) return false;
  const SchedulerConfig& c = policy.config;
  return snap.now_ms - last_rekey_ms_ >= c.recalc_period_ms ||
         (c.guarantee_weight != 0 &&
          GuaranteeTiers(snap.below_guarantee_since, snap.now_ms, c.reclaim_after_ms) != keyed_tiers_);
}

void OrderedQueue::Order(Snapshot& snap, const QueuePolicy& policy) {
  if (snap.pending.empty()) return;  // nothing to key: the period starts with the next job
  if (RekeyDue(snap, policy)) {
    Rekey(snap, policy);
  } else {
    MergeNew(snap.pending, policy);
  }
}

void OrderedQueue::MergeNew(std::vector<PendingJob>& pending, const QueuePolicy& policy) {
  if (keys_.size() != pending.size()) MergeTail(pending, policy);
}

void OrderedQueue::Rekey(Snapshot& snap, const QueuePolicy& policy) {
  const SchedulerConfig& c = policy.config;
  fair_share_ = FairShareFactors(snap.team_usage, policy.quotas);
  guarantee_levels_ = UsageTracker(snap, policy.catalog, policy.quotas)
                          .GuaranteeLevels(snap.below_guarantee_since, snap.now_ms, c.reclaim_after_ms);
  std::vector<QueueEntry> order = OrderQueue(snap.pending, Context(policy, snap.now_ms));
  std::vector<PendingJob> pending;
  pending.reserve(order.size());
  for (QueueEntry& e : order) pending.push_back(std::move(snap.pending[e.pending_index]));
  snap.pending = std::move(pending);
  keys_ = std::move(order);
  last_rekey_ms_ = snap.now_ms;
  keyed_tiers_ = GuaranteeTiers(snap.below_guarantee_since, snap.now_ms, c.reclaim_after_ms);
}

void OrderedQueue::MergeTail(std::vector<PendingJob>& pending, const QueuePolicy& policy) {
  // The tail's keys take their age as of the last re-key, like the ordered part's: keyed at
  // a later "now", a job merged a few ms after another would count those ms as age and
  // pass older equal jobs.
  const size_t ordered = keys_.size();
  QueueContext ctx = Context(policy, last_rekey_ms_);
  std::vector<QueueEntry> tail;
  tail.reserve(pending.size() - ordered);
  for (size_t i = ordered; i < pending.size(); ++i) tail.push_back(MakeQueueEntry(pending, i, ctx));
  std::sort(tail.begin(), tail.end(),
            [&](const QueueEntry& a, const QueueEntry& b) { return QueueBefore(a, b, pending); });
  // The tail's jobs go aside in order, then a merge from the back fills the same vectors:
  // only the jobs behind the first new one's place move, and nothing is allocated but the
  // tail (a long backlog takes a few arrivals at most cycles).
  std::vector<PendingJob> tail_jobs;
  tail_jobs.reserve(tail.size());
  for (const QueueEntry& e : tail) tail_jobs.push_back(std::move(pending[e.pending_index]));
  keys_.resize(pending.size());
  size_t a = ordered, b = tail.size(), w = pending.size();
  while (b > 0) {
    --w;
    if (a > 0 && QueueKeyBefore(tail[b - 1], tail_jobs[b - 1].spec->id, keys_[a - 1], pending[a - 1].spec->id)) {
      --a;  // the ordered job comes after the last new one
      pending[w] = std::move(pending[a]);
      keys_[w] = keys_[a];
    } else {
      --b;
      pending[w] = std::move(tail_jobs[b]);
      keys_[w] = tail[b];
    }
  }
}

void OrderedQueue::Nominate(std::vector<PendingJob>& pending, const std::string& job_id) {
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].spec->id != job_id || pending[i].nominated) continue;
    PendingJob job = std::move(pending[i]);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    if (i < keys_.size()) keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(i));
    job.nominated = true;  // its key changes: first in its class
    pending.push_back(std::move(job));
    return;
  }
}

void OrderedQueue::Remove(std::vector<PendingJob>& pending, const std::set<std::string>& job_ids) {
  if (job_ids.empty()) return;
  DropEntries(pending, keys_, [&](size_t i) { return job_ids.count(pending[i].spec->id) > 0; });
}

void OrderedQueue::TakeStarted(std::vector<PendingJob>& pending, const Plan& plan) {
  if (plan.starts.empty()) return;
  std::vector<bool> started(pending.size(), false);
  for (const StartDecision& s : plan.starts) started[s.pending_index] = true;
  DropEntries(pending, keys_, [&](size_t i) { return started[i]; });
}

}  // namespace gantry
