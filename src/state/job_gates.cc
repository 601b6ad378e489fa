// The gates: why a pending job is kept out of the queue, and whether a dependency may be
// accepted (job_gates.h).
#include "state/job_gates.h"

#include <fmt/format.h>

#include <algorithm>

namespace gantry {

namespace {

bool Succeeded(const JobRecord& j) { return j.state == JobState::kSucceeded; }
bool NotOk(const JobRecord& j) { return j.state == JobState::kFailed || j.state == JobState::kCancelled; }
bool Started(const JobRecord& j) { return j.runs > 0 || IsTerminal(j.state); }

// How people name a job: "7", or "12_4" for task 4 of array 12.
std::string Named(const JobRecord& j) {
  return j.array_id > 0 ? fmt::format("{}_{}", j.array_id, j.array_task) : j.spec->id;
}

const char* Wanted(DependencyKind k) {
  switch (k) {
    case DependencyKind::kAfter: return "to start";
    case DependencyKind::kAfterOk: return "to succeed";
    case DependencyKind::kAfterNotOk: return "to fail";
    case DependencyKind::kAfterAny: return "to end";
    case DependencyKind::kAfterCorr: return "to succeed";
    case DependencyKind::kSingleton: break;
  }
  return "";
}

}  // namespace

const JobRecord* JobTableView::FindTask(uint64_t array_id, int task) const {
  auto a = arrays.find(array_id);
  if (a == arrays.end()) return nullptr;
  auto t = a->second.find(task);
  return t == a->second.end() ? nullptr : &jobs.at(t->second);
}

std::vector<const JobRecord*> JobTableView::TargetsOf(const DependencyTarget& t) const {
  if (t.task >= 0) {
    const JobRecord* task = FindTask(t.job, t.task);
    return task ? std::vector<const JobRecord*>{task} : std::vector<const JobRecord*>{};
  }
  auto a = arrays.find(t.job);
  if (a == arrays.end()) {
    auto j = jobs.find(t.job);
    return j == jobs.end() ? std::vector<const JobRecord*>{} : std::vector<const JobRecord*>{&j->second};
  }
  std::vector<const JobRecord*> out;
  for (const auto& [task, seq] : a->second) out.push_back(&jobs.at(seq));
  return out;
}

namespace {

// What a cycle check has walked: the jobs (none of them reaches the job looked for) and
// the targets already expanded (a whole array is listed once, however many wait for it).
struct CycleWalk {
  std::set<uint64_t> seen;
  std::set<std::pair<uint64_t, int64_t>> expanded;
};

// Whether `from` is `seq` or waits for it through dependencies of jobs not ended.
bool Reaches(const JobTableView& table, const JobRecord& from, uint64_t seq, CycleWalk& walk) {
  if (from.seq == seq) return true;
  if (!walk.seen.insert(from.seq).second) return false;
  for (const DependencyTerm& term : from.after) {
    for (const DependencyTarget& t : term.targets) {
      if (!walk.expanded.insert({t.job, t.task}).second) continue;
      for (const JobRecord* next : table.TargetsOf(t)) {
        if (!IsTerminal(next->state) && Reaches(table, *next, seq, walk)) return true;
      }
    }
  }
  return false;
}

}  // namespace

Status JobGates::CheckDependency(const JobTableView& table, const Actor& who, const JobSpec& spec,
                                 const JobRecord* self) {
  if (spec.dependency.empty()) return Status::Ok();
  auto terms = ParseDependency(spec.dependency);
  if (!terms) return terms.status();
  bool is_array = !spec.array.empty() || (self && self->array_id > 0);
  CycleWalk walk;  // one for the whole list: each job and target is walked once
  for (const DependencyTerm& term : *terms) {
    if (term.kind == DependencyKind::kAfterCorr && !is_array) {
      return Status::Invalid("dependency", "aftercorr is for arrays: task i of this array waits for task i of another");
    }
    for (const DependencyTarget& t : term.targets) {
      std::vector<const JobRecord*> jobs = table.TargetsOf(t);
      bool visible = !jobs.empty() && std::all_of(jobs.begin(), jobs.end(),
                                                  [&](const JobRecord* j) { return who.SeesTeam(j->spec->team); });
      if (!visible) return Status::Invalid("dependency", fmt::format("no job {}", ToString(t)));
      if (term.kind == DependencyKind::kAfterCorr && !table.arrays.count(t.job)) {
        return Status::Invalid("dependency", fmt::format("aftercorr:{}: job {} is not an array", t.job, t.job));
      }
      for (const JobRecord* j : jobs) {
        if (self && Reaches(table, *j, self->seq, walk)) {
          return Status::Invalid("dependency", fmt::format("job {} waits for this job: a cycle", j->spec->id));
        }
      }
    }
  }
  return Status::Ok();
}

// Whether one dependency term holds for `job`: "" when met, else the wait (never: it can
// no longer be met).
GateBlocker JobGates::TermBlocker(const JobRecord& job, const DependencyTerm& term) {
  if (term.kind == DependencyKind::kSingleton) {
    if (!names_scanned_) {
      names_scanned_ = true;
      // The jobs not ended: queued, kept out, running or stopping.
      auto note = [&](const JobSpec& s) {
        uint64_t seq = std::stoull(s.id);
        auto [it, fresh] = oldest_by_name_.try_emplace({s.user, s.name}, seq);
        if (!fresh) it->second = std::min(it->second, seq);
      };
      for (const PendingJob& p : table_.queued) note(*p.spec);
      for (const RunningJob& r : table_.running) note(*r.spec);
      for (uint64_t seq : table_.kept_out) note(*table_.jobs.at(seq).spec);
      note(*job.spec);
    }
    uint64_t oldest = oldest_by_name_.at({job.spec->user, job.spec->name});
    if (oldest == job.seq) return {};
    return {"dependency",
            fmt::format("singleton: waits for job {} (also {}'s '{}') to end", oldest, job.spec->user, job.spec->name)};
  }
  for (const DependencyTarget& t : term.targets) {
    std::vector<const JobRecord*> targets;
    if (term.kind == DependencyKind::kAfterCorr) {
      if (const JobRecord* task = table_.FindTask(t.job, job.array_task)) targets.push_back(task);
    } else {
      targets = table_.TargetsOf(t);
    }
    for (const JobRecord* target : targets) {
      std::string wait = fmt::format("{}: waits for job {} {}", ToString(term.kind), Named(*target), Wanted(term.kind));
      switch (term.kind) {
        case DependencyKind::kAfter:
          if (!Started(*target)) return {"dependency", wait};
          break;
        case DependencyKind::kAfterOk:
        case DependencyKind::kAfterCorr:
          if (NotOk(*target)) {
            return {"dependency",
                    fmt::format("dependency never satisfied: job {} {} ({})", Named(*target), ToString(target->state),
                                ToString(term.kind)),
                    true};
          }
          if (!Succeeded(*target)) return {"dependency", wait};
          break;
        case DependencyKind::kAfterNotOk:
          if (Succeeded(*target)) {
            return {"dependency",
                    fmt::format("dependency never satisfied: job {} succeeded (afternotok)", Named(*target)), true};
          }
          if (!NotOk(*target)) return {"dependency", wait};
          break;
        case DependencyKind::kAfterAny:
          if (!IsTerminal(target->state)) return {"dependency", wait};
          break;
        case DependencyKind::kSingleton: break;
      }
    }
  }
  return {};
}

GateBlocker JobGates::WhyKeptOut(const JobRecord& job) {
  if (!job.hold.empty()) {
    if (job.hold == "admin") return {"held", "held by an admin"};
    // An array's tasks say the array's id (the same words for each, so they show as one row).
    if (job.array_id > 0) {
      return {"held", fmt::format("held (gantry release {0} for the whole array, {0}_N for one task)", job.array_id)};
    }
    return {"held", "held (gantry release " + job.spec->id + ")"};
  }
  for (const DependencyTerm& term : job.after) {
    GateBlocker b = TermBlocker(job, term);
    if (!b.code.empty()) return b;
  }
  if (job.array_limit > 0) {
    auto [it, fresh] = array_active_.try_emplace(job.array_id, 0);
    if (fresh) {
      for (const auto& [task, seq] : table_.arrays.at(job.array_id)) {
        const JobRecord& t = table_.jobs.at(seq);
        bool queued = t.state == JobState::kPending && !table_.kept_out.count(seq);
        if (queued || t.state == JobState::kRunning || t.state == JobState::kStopping) ++it->second;
      }
    }
    if (it->second >= job.array_limit) {
      return {"array_limit", fmt::format("array {} runs at most {} tasks at once", job.array_id, job.array_limit)};
    }
  }
  return {};
}

}  // namespace gantry
