// Pending jobs kept out of the scheduler's queue, as Slurm keeps them PENDING with a reason:
// held (JobHeldUser/Admin), a dependency not yet met (Dependency), an array at its limit of
// tasks at once (JobArrayTaskLimit). Each cycle admits what may now be queued and fails a
// job whose dependency can never be met. Also job arrays: expansion at submit, their tasks
// by index, and an array's summary.
#include <fmt/format.h>

#include "state/controller_state.h"

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

const JobRecord* ControllerState::FindTask(uint64_t array_id, int task) const {
  auto a = arrays_.find(array_id);
  if (a == arrays_.end()) return nullptr;
  auto t = a->second.find(task);
  return t == a->second.end() ? nullptr : &jobs_.at(t->second);
}

std::vector<const JobRecord*> ControllerState::TargetsOf(const DependencyTarget& t) const {
  if (t.task >= 0) {
    const JobRecord* task = FindTask(t.job, t.task);
    return task ? std::vector<const JobRecord*>{task} : std::vector<const JobRecord*>{};
  }
  auto a = arrays_.find(t.job);
  if (a == arrays_.end()) {
    auto j = jobs_.find(t.job);
    return j == jobs_.end() ? std::vector<const JobRecord*>{} : std::vector<const JobRecord*>{&j->second};
  }
  std::vector<const JobRecord*> out;
  for (const auto& [task, seq] : a->second) out.push_back(&jobs_.at(seq));
  return out;
}

bool ControllerState::Reaches(const JobRecord& from, uint64_t seq, std::set<uint64_t>& seen) const {
  if (from.seq == seq) return true;
  if (!seen.insert(from.seq).second) return false;
  for (const DependencyTerm& term : from.after) {
    for (const DependencyTarget& t : term.targets) {
      for (const JobRecord* next : TargetsOf(t)) {
        if (!IsTerminal(next->state) && Reaches(*next, seq, seen)) return true;
      }
    }
  }
  return false;
}

Status ControllerState::ResolveDependency(const Actor& who, const JobSpec& spec, const JobRecord* self) const {
  if (spec.dependency.empty()) return Status::Ok();
  auto terms = ParseDependency(spec.dependency);
  if (!terms) return terms.status();
  bool is_array = !spec.array.empty() || (self && self->array_id > 0);
  for (const DependencyTerm& term : *terms) {
    if (term.kind == DependencyKind::kAfterCorr && !is_array) {
      return Status::Invalid("dependency", "aftercorr is for arrays: task i of this array waits for task i of another");
    }
    for (const DependencyTarget& t : term.targets) {
      std::vector<const JobRecord*> jobs = TargetsOf(t);
      bool visible = !jobs.empty() && std::all_of(jobs.begin(), jobs.end(),
                                                  [&](const JobRecord* j) { return who.SeesTeam(j->spec->team); });
      if (!visible) return Status::Invalid("dependency", fmt::format("no job {}", ToString(t)));
      if (term.kind == DependencyKind::kAfterCorr && !arrays_.count(t.job)) {
        return Status::Invalid("dependency", fmt::format("aftercorr:{}: job {} is not an array", t.job, t.job));
      }
      std::set<uint64_t> seen;
      for (const JobRecord* j : jobs) {
        if (self && Reaches(*j, self->seq, seen)) {
          return Status::Invalid("dependency", fmt::format("job {} waits for this job: a cycle", j->spec->id));
        }
      }
    }
  }
  return Status::Ok();
}

// Whether one dependency term holds for `job`: "" when met, else the wait (never: it can
// no longer be met).
ControllerState::Blocker ControllerState::TermBlocker(const JobRecord& job, const DependencyTerm& term,
                                                      GateScan& scan) const {
  if (term.kind == DependencyKind::kSingleton) {
    if (!scan.names_scanned) {
      scan.names_scanned = true;
      // The jobs not ended: queued, kept out, running or stopping.
      auto note = [&](const JobSpec& s) {
        uint64_t seq = std::stoull(s.id);
        auto [it, fresh] = scan.oldest_by_name.try_emplace({s.user, s.name}, seq);
        if (!fresh) it->second = std::min(it->second, seq);
      };
      for (const PendingJob& p : snap_.pending) note(*p.spec);
      for (const RunningJob& r : snap_.running) note(*r.spec);
      for (uint64_t seq : kept_out_) note(*jobs_.at(seq).spec);
      note(*job.spec);
    }
    uint64_t oldest = scan.oldest_by_name.at({job.spec->user, job.spec->name});
    if (oldest == job.seq) return {};
    return {"dependency",
            fmt::format("singleton: waits for job {} (also {}'s '{}') to end", oldest, job.spec->user, job.spec->name)};
  }
  for (const DependencyTarget& t : term.targets) {
    std::vector<const JobRecord*> targets;
    if (term.kind == DependencyKind::kAfterCorr) {
      if (const JobRecord* task = FindTask(t.job, job.array_task)) targets.push_back(task);
    } else {
      targets = TargetsOf(t);
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

ControllerState::Blocker ControllerState::WhyKeptOut(const JobRecord& job, GateScan& scan) const {
  if (!job.hold.empty()) {
    if (job.hold == "admin") return {"held", "held by an admin"};
    // An array's tasks say the array's id (the same words for each, so they show as one row).
    if (job.array_id > 0) {
      return {"held", fmt::format("held (gantry release {0} for the whole array, {0}_N for one task)", job.array_id)};
    }
    return {"held", "held (gantry release " + job.spec->id + ")"};
  }
  for (const DependencyTerm& term : job.after) {
    Blocker b = TermBlocker(job, term, scan);
    if (!b.code.empty()) return b;
  }
  if (job.array_limit > 0) {
    auto [it, fresh] = scan.array_active.try_emplace(job.array_id, 0);
    if (fresh) {
      for (const auto& [task, seq] : arrays_.at(job.array_id)) {
        const JobRecord& t = jobs_.at(seq);
        bool queued = t.state == JobState::kPending && !kept_out_.count(seq);
        if (queued || t.state == JobState::kRunning || t.state == JobState::kStopping) ++it->second;
      }
    }
    if (it->second >= job.array_limit) {
      return {"array_limit", fmt::format("array {} runs at most {} tasks at once", job.array_id, job.array_limit)};
    }
  }
  return {};
}

JobPlace ControllerState::GatedPlace(const JobRecord& job) const {
  GateScan scan;
  return WhyKeptOut(job, scan).code.empty() ? JobPlace::kQueued : JobPlace::kKeptOut;
}

void ControllerState::AdmitKeptOut() {
  if (!gates_dirty_ || kept_out_.empty()) return;
  gates_dirty_ = false;
  GateScan scan;
  std::vector<uint64_t> seqs(kept_out_.begin(), kept_out_.end());
  for (uint64_t seq : seqs) {
    JobRecord& job = jobs_.at(seq);
    Blocker b = WhyKeptOut(job, scan);
    if (!b.code.empty() && !b.never) continue;
    if (b.never) {
      Finish(job, JobState::kFailed, b.reason);
    } else {
      MoveJob(job, {.state = JobState::kPending, .place = JobPlace::kQueued});
      if (job.array_limit > 0) scan.array_active[job.array_id]++;
    }
  }
}

std::vector<uint64_t> ControllerState::AddArray(const Actor& who, const JobSpec& spec) {
  ArraySpec array = *ParseArraySpec(spec.array);
  uint64_t array_id = next_seq_;
  int step = array.tasks.size() > 1 ? array.tasks[1] - array.tasks[0] : 1;
  std::vector<uint64_t> seqs;
  for (int task : array.tasks) {
    JobSpec t = spec;
    t.array.clear();
    for (const char* prefix : {"GANTRY_ARRAY_", "SLURM_ARRAY_"}) {
      std::string p = prefix;
      t.env[p + "JOB_ID"] = std::to_string(array_id);
      t.env[p + "TASK_ID"] = std::to_string(task);
      t.env[p + "TASK_COUNT"] = std::to_string(array.tasks.size());
      t.env[p + "TASK_MIN"] = std::to_string(array.tasks.front());
      t.env[p + "TASK_MAX"] = std::to_string(array.tasks.back());
      t.env[p + "TASK_STEP"] = std::to_string(step);
    }
    // With a dependency every task waits for the next cycle's AdmitKeptOut.
    bool queue = spec.dependency.empty() && (array.limit == 0 || seqs.size() < static_cast<size_t>(array.limit));
    seqs.push_back(AddJob(who, std::move(t), {array_id, task, array.limit, queue}).seq);
  }
  return seqs;
}

std::vector<JobRecord*> ControllerState::WholeArray(const std::string& id) {
  std::vector<JobRecord*> out;
  // "12_[4-5,7]": those tasks of array 12, as Slurm's scancel and scontrol take them.
  if (size_t bracket = id.find("_["); bracket != std::string::npos && id.back() == ']') {
    JobRecord* head = Find(id.substr(0, bracket));
    auto listed = ParseArraySpec(id.substr(bracket + 2, id.size() - bracket - 3));
    if (!head || head->array_id != head->seq || !listed || listed->limit != 0) return out;
    const std::map<int, uint64_t>& tasks = arrays_.at(head->array_id);
    for (int task : listed->tasks) {
      if (auto it = tasks.find(task); it != tasks.end()) out.push_back(&jobs_.at(it->second));
    }
    return out;
  }
  if (id.find('_') != std::string::npos) return out;
  JobRecord* head = Find(id);
  if (!head || head->array_id != head->seq) return out;
  for (const auto& [task, seq] : arrays_.at(head->array_id)) out.push_back(&jobs_.at(seq));
  return out;
}

nlohmann::json ControllerState::ActedOn(const std::string& named, const std::vector<JobRecord*>& tasks,
                                        size_t changed) const {
  std::map<std::string, int> states;
  for (const JobRecord* t : tasks) states[ToString(t->state)]++;
  return {{"named", named}, {"tasks", tasks.size()}, {"changed", changed}, {"states", states}};
}

nlohmann::json ControllerState::ArraySummary(uint64_t array_id) const {
  std::map<std::string, int> states;
  std::vector<int> tasks;
  int limit = 0;
  for (const auto& [task, seq] : arrays_.at(array_id)) {
    const JobRecord& t = jobs_.at(seq);
    states[ToString(t.state)]++;
    tasks.push_back(task);
    limit = t.array_limit;
  }
  nlohmann::json out = {{"job_id", std::to_string(array_id)},
                        {"tasks", tasks.size()},
                        {"task_ids", FormatTaskList(tasks)},
                        {"states", states}};
  if (limit > 0) out["limit"] = limit;
  return out;
}

}  // namespace gantry
