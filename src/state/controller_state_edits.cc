// Changing a job after its submit, as Slurm's scontrol hold/release/update do: a pending
// job is held out of the queue (by its team or an admin) and released back into it; a
// pending job's name, priority, limits, estimate and GPU types change, checked as a
// submit is; a running job's time limit changes (only admins extend it). Every change is
// audited and written with the job.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/job_changes.h"
#include "state/controller_state.h"

namespace gantry {

Expected<JobRecord*> ControllerState::JobToChange(const Actor& who, const std::string& action, const std::string& id) {
  JobRecord* job = Find(id);
  if (!job) {  // "12_[4-5]": its first task stands for the list
    std::vector<JobRecord*> listed = WholeArray(id);
    if (!listed.empty()) job = listed.front();
  }
  if (!job || !who.SeesTeam(job->spec->team)) {
    return Refuse(who, action, id, {StatusCode::kNotFound, "no job " + id, "id"});
  }
  if (IsTerminal(job->state)) {
    // An array's id acts on every task not ended: its first task's end is not the array's.
    std::vector<JobRecord*> tasks = WholeArray(id);
    if (std::any_of(tasks.begin(), tasks.end(), [](const JobRecord* t) { return !IsTerminal(t->state); })) return job;
    return Refuse(who, action, id,
                  Status::Precondition(
                      "id", tasks.empty() ? fmt::format("job {} has ended already ({})", id, ToString(job->state))
                                          : fmt::format("every task of array {} has ended already", id)));
  }
  return job;
}

void ControllerState::HoldOne(const Actor& who, JobRecord& job) {
  std::string hold = who.admin() ? "admin" : "user";
  if (job.hold == hold || job.hold == "admin") return;  // an owner's hold does not weaken an admin's
  MoveJob(job, {.state = JobState::kPending, .place = JobPlace::kKeptOut});
  job.hold = hold;
  Event(job, "held", {{"by", who.user}, {"hold", hold}});
  dirty_ = true;
}

void ControllerState::ReleaseOne(const Actor& who, JobRecord& job) {
  job.hold.clear();
  gates_dirty_ = true;  // queued at the next cycle unless a dependency or its array's limit keeps it out
  Event(job, "released_hold", {{"by", who.user}});
  Dirty(job);
  dirty_ = true;
}

Expected<JobsChanged> ControllerState::Hold(const Actor& who, const std::string& id) {
  const std::string action = ActionWords(StateAction::kHold, id);
  auto found = JobToChange(who, action, id);
  if (!found) return found.status();
  JobRecord& job = **found;
  if (std::vector<JobRecord*> tasks = WholeArray(id); !tasks.empty()) {
    size_t changed = 0;
    for (JobRecord* t : tasks) {
      if (t->state != JobState::kPending) continue;
      std::string before = t->hold;
      HoldOne(who, *t);
      changed += t->hold != before;
    }
    Audit(who, action, id, "ok", fmt::format("{} of {} tasks", changed, tasks.size()));
    return Changed(job, id, tasks, changed);
  }
  if (job.state != JobState::kPending) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} is {}: only a pending job is held (cancel stops "
                                                         "a running one)",
                                                         id, ToString(job.state))));
  }
  HoldOne(who, job);
  Audit(who, action, id, "ok");
  return JobsChanged::One(job.spec->id, id);
}

Expected<JobsChanged> ControllerState::Release(const Actor& who, const std::string& id) {
  const std::string action = ActionWords(StateAction::kRelease, id);
  auto found = JobToChange(who, action, id);
  if (!found) return found.status();
  JobRecord& job = **found;
  std::vector<JobRecord*> tasks = WholeArray(id);
  const bool several = !tasks.empty();
  if (tasks.empty()) tasks.push_back(&job);
  bool admin_hold = false, any_held = false;
  for (JobRecord* t : tasks) {
    any_held |= !t->hold.empty();
    admin_hold |= t->hold == "admin";
  }
  if (!any_held) return Refuse(who, action, id, Status::Precondition("id", fmt::format("job {} is not held", id)));
  if (admin_hold && !who.admin()) {
    return Refuse(who, action, id, Status::Denied("id", fmt::format("job {} was held by an admin", id)));
  }
  size_t changed = 0;
  for (JobRecord* t : tasks) {
    if (t->hold.empty()) continue;
    ReleaseOne(who, *t);
    ++changed;
  }
  Audit(who, action, id, "ok");
  return several ? Changed(job, id, tasks, changed) : JobsChanged::One(job.spec->id, id);
}

Expected<JobsChanged> ControllerState::Update(const Actor& who, const std::string& id, const JobChanges& changes) {
  const std::string action = ActionWords(StateAction::kUpdate, id);
  auto found = JobToChange(who, action, id);
  if (!found) return found.status();
  JobRecord& job = **found;
  if (IsTerminal(job.state)) {  // an array's ended first task: its id acts on every task only to stop them
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} has ended: change the array's other tasks by their "
                                                         "own ids ({}_N)",
                                                         id, id)));
  }
  if (job.state != JobState::kPending && !changes.OnlyTimeLimit()) {
    auto other = std::find_if(changes.fields.begin(), changes.fields.end(),
                              [](const std::string& f) { return StoredFieldName(f) != "time_limit_s"; });
    return Refuse(who, action, id,
                  Status::Precondition(*other, fmt::format("job {} is {}: only its time_limit changes", job.spec->id,
                                                           ToString(job.state))));
  }
  auto spec = std::make_shared<JobSpec>(*job.spec);
  Status s = changes.ApplyTo(*spec);
  if (s.ok()) {
    // An array task's GANTRY_ARRAY_* variables are Gantry's own (set at submit), not the
    // user's: checked without them, kept as they were.
    std::map<std::string, std::string> set_by_gantry;
    for (const auto& [name, value] : job.spec->env) {
      if (name.rfind("GANTRY_ARRAY_", 0) == 0 && spec->env.erase(name)) set_by_gantry[name] = value;
    }
    s = ValidateJobSpec(*spec, options_.config.catalog, options_.config.scheduler);
    spec->env.insert(set_by_gantry.begin(), set_by_gantry.end());
  }
  if (s.ok()) s = CheckTeamPermissions(who, *spec);
  if (s.ok() && job.state == JobState::kPending) s = CheckAdmissibleNow(*spec);
  if (s.ok()) s = CheckQuotaAdmissible(*spec, *quotas_, options_.config.catalog);
  if (s.ok()) s = JobGates::CheckDependency(JobTable(), who, *spec, &job);
  if (s.ok() && job.state != JobState::kPending && spec->time_limit_ms > job.spec->time_limit_ms && !who.admin()) {
    s = Status::Denied("time_limit", "only admins extend the time limit of a running job");
  }
  if (!s.ok()) return Refuse(who, action, id, s);
  nlohmann::json changed = nlohmann::json::object();
  const nlohmann::json stored = SpecToJson(*spec);
  for (const std::string& field : changes.fields) {
    changed[StoredFieldName(field)] = stored.value(StoredFieldName(field), nlohmann::json());
  }
  ReplaceSpec(job, std::move(spec));
  Event(job, "updated", {{"by", who.user}, {"changes", changed}});
  Audit(who, action, id, "ok", changed.dump(-1, ' ', false, kReplaceBadUtf8));
  return JobsChanged::One(job.spec->id, id);
}

void ControllerState::ReplaceSpec(JobRecord& job, JobSpecPtr spec) {
  const std::string id = job.spec->id;  // a copy: job.spec is replaced below
  if (job.state == JobState::kRunning || job.state == JobState::kStopping) {
    RunningOf(id).spec = spec;
    job.spec = std::move(spec);
  } else {
    // Queued again at the tail of its class, or kept out if its new dependency says so.
    job.spec = std::move(spec);
    job.after = job.spec->dependency.empty() ? std::vector<DependencyTerm>{} : *ParseDependency(job.spec->dependency);
    MoveJob(job, {.state = JobState::kPending, .place = GatedPlace(job), .again = true});
    // An array task counted itself among its array's active tasks: the next cycle's gates
    // look again, and queue it if its array has room without it.
    gates_dirty_ = true;
  }
  Dirty(job);  // a running job's new spec (MoveJob marks a pending one)
  dirty_ = true;
}

}  // namespace gantry
