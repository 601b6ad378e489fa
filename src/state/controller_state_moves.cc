// Where each job is kept, and the one function that moves it (MoveJob): a job's state and
// the indexes that say where it is (the scheduler's queue, the kept-out set, the running
// entries with their nodes, ports and MIG orders, the waiting counts) change together.
// CheckInvariants says whether they still agree.
#include <fmt/format.h>

#include "state/controller_state.h"

namespace gantry {

JobPlace ControllerState::PlaceOf(const JobRecord& job) const {
  switch (job.state) {
    case JobState::kPending: return kept_out_.count(job.seq) ? JobPlace::kKeptOut : JobPlace::kQueued;
    case JobState::kRunning:
    case JobState::kStopping: return JobPlace::kRunning;
    default: return JobPlace::kEnded;
  }
}

void ControllerState::MoveJob(JobRecord& job, const JobMove& move) {
  const std::string id = job.spec->id;  // a copy: the running entry that holds the spec may go
  const JobPlace from = move.is_new ? JobPlace::kEnded : PlaceOf(job);
  const bool was_waiting = !move.is_new && job.state == JobState::kPending;
  const bool leaves = move.again || from != move.place;
  if (leaves) {
    switch (from) {
      case JobPlace::kQueued:
        if (!move.dequeued) RemovePending(id);
        break;
      case JobPlace::kKeptOut: kept_out_.erase(job.seq); break;
      case JobPlace::kRunning: RemoveRunning(id); break;
      case JobPlace::kEnded: break;
    }
  }
  job.state = move.state;
  const bool waiting = move.state == JobState::kPending;
  if (waiting != was_waiting) {
    if (waiting) CountWaiting(job, 1);
    if (was_waiting) CountWaiting(job, -1);
  }
  if (leaves) {
    switch (move.place) {
      case JobPlace::kQueued:
        snap_.pending.push_back({job.spec, job.submit_ms, job.attained_gpu_ms, job.evictions});
        break;
      case JobPlace::kKeptOut: kept_out_.insert(job.seq); break;
      case JobPlace::kRunning:
        running_pos_[id] = move.running_index;
        running_nodes_[id] = NodeIdsOf(snap_.running.at(static_cast<size_t>(move.running_index)).placement);
        break;
      case JobPlace::kEnded: break;
    }
  }
  Dirty(job);
}

Status ControllerState::CheckInvariants() const {
  auto broken = [](const std::string& what) { return Status::Internal("state invariant: " + what); };
  std::unordered_map<std::string, size_t> queued;  // job id -> its entries in snap_.pending
  for (const PendingJob& p : snap_.pending) queued[p.spec->id]++;
  if (running_pos_.size() != snap_.running.size()) {
    return broken(fmt::format("{} running entries, {} indexed", snap_.running.size(), running_pos_.size()));
  }
  if (running_nodes_.size() != running_pos_.size()) {
    return broken(
        fmt::format("{} running jobs, {} with nodes still running", running_pos_.size(), running_nodes_.size()));
  }
  std::unordered_map<std::string, int> by_user, by_team;
  size_t queued_jobs = 0, kept_out = 0, running = 0, ports = 0;
  for (const auto& [seq, job] : jobs_) {
    const std::string& id = job.spec->id;
    const JobPlace place = PlaceOf(job);
    const size_t entries = queued.count(id) ? queued.at(id) : 0;
    if (entries != (place == JobPlace::kQueued ? 1u : 0u)) {
      return broken(fmt::format("job {} ({}) has {} queue entries", id, ToString(job.state), entries));
    }
    if (kept_out_.count(seq) && job.state != JobState::kPending) {
      return broken(fmt::format("job {} is kept out but {}", id, ToString(job.state)));
    }
    auto pos = running_pos_.find(id);
    if ((pos != running_pos_.end()) != (place == JobPlace::kRunning)) {
      return broken(fmt::format("job {} is {} but {} a running entry", id, ToString(job.state),
                                pos != running_pos_.end() ? "has" : "has no"));
    }
    if (place != JobPlace::kRunning && (running_nodes_.count(id) || mig_orders_.count(id) || !job.ports.empty())) {
      return broken(fmt::format("job {} is {} but holds nodes, MIG orders or ports of a run", id, ToString(job.state)));
    }
    if (place == JobPlace::kQueued || place == JobPlace::kKeptOut) {
      by_user[job.spec->user]++;
      by_team[job.spec->team]++;
      (place == JobPlace::kQueued ? queued_jobs : kept_out)++;
    }
    if (place == JobPlace::kRunning) {
      running++;
      const RunningJob& r = snap_.running.at(static_cast<size_t>(pos->second));
      if (r.spec->id != id || r.spec != job.spec) {
        return broken(fmt::format("job {}'s running entry is job {}'s or holds another spec", id, r.spec->id));
      }
      auto nodes = running_nodes_.find(id);
      if (nodes == running_nodes_.end() || nodes->second.empty()) {
        return broken(fmt::format("job {} is {} with no node still running it", id, ToString(job.state)));
      }
      const std::set<std::string> placed = NodeIdsOf(r.placement);
      for (const std::string& n : nodes->second) {
        if (!placed.count(n)) return broken(fmt::format("job {} runs on {}, outside its placement", id, n));
      }
      for (const JobPort& p : job.ports) ports += p.port >= 0;
    }
  }
  for (const PendingJob& p : snap_.pending) {
    const JobRecord* job = Find(p.spec->id);
    if (!job || job->spec != p.spec)
      return broken(fmt::format("queue entry {} is no job's or an old spec", p.spec->id));
  }
  if (kept_out != kept_out_.size()) return broken(fmt::format("{} kept out, {} pending", kept_out_.size(), kept_out));
  if (queued_jobs != snap_.pending.size()) {
    return broken(fmt::format("{} queue entries for {} queued jobs", snap_.pending.size(), queued_jobs));
  }
  if (running != running_pos_.size())
    return broken(fmt::format("{} running entries, {} running jobs", running_pos_.size(), running));
  if (by_user != waiting_by_user_ || by_team != waiting_by_team_) return broken("the waiting counts by user or team");
  size_t held = 0;
  for (const Node& n : snap_.nodes) held += ports_.Held(n.id);
  if (held != ports) return broken(fmt::format("{} ports held, {} lent to running jobs", held, ports));
  return Status::Ok();
}

}  // namespace gantry
