// Changing a job after its submit, as Slurm's scontrol hold/release/update do: a pending
// job is held out of the queue (by its team or an admin) and released back into it; a
// pending job's name, priority, limits, estimate and GPU types change, checked as a
// submit is; a running job's time limit changes (only admins extend it). Every change is
// audited and written with the job.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/spec_yaml.h"
#include "state/controller_state.h"

namespace gantry {

namespace {

const std::set<std::string>& PendingFields() {
  static const std::set<std::string> kFields = {"name",         "priority",           "time_limit",
                                                "time_limit_s", "estimated_duration", "estimated_duration_s",
                                                "gpu_types",    "cost_limit",         "dependency"};
  return kFields;
}

// A time field's two spellings ("time_limit" as people write it, "time_limit_s" in
// seconds) are one field: the name the stored spec uses, and the one a change replaces.
std::string StoredName(const std::string& field) {
  if (field == "time_limit" || field == "estimated_duration") return field + "_s";
  return field;
}

std::string OtherSpelling(const std::string& field) {
  if (field == "time_limit" || field == "estimated_duration") return field + "_s";
  if (field == "time_limit_s" || field == "estimated_duration_s") return field.substr(0, field.size() - 2);
  return "";
}

}  // namespace

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

Answer ControllerState::Hold(const Actor& who, const std::string& id) {
  std::string action = "POST /v1/jobs/" + id + "/hold";
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
    nlohmann::json view = ApiView(job, true);
    view["acted_on"] = ActedOn(id, tasks, changed);
    return view;
  }
  if (job.state != JobState::kPending) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} is {}: only a pending job is held (cancel stops "
                                                         "a running one)",
                                                         id, ToString(job.state))));
  }
  HoldOne(who, job);
  Audit(who, action, id, "ok");
  return ApiView(job, true);
}

Answer ControllerState::Release(const Actor& who, const std::string& id) {
  std::string action = "POST /v1/jobs/" + id + "/release";
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
  nlohmann::json view = ApiView(job, true);
  if (several) view["acted_on"] = ActedOn(id, tasks, changed);
  return view;
}

Status ControllerState::CheckUpdate(const JobRecord& job, const YAML::Node& changes) const {
  if (!changes.IsMap() || changes.size() == 0) {
    return Status::Invalid("body", "expected a map of the fields to change, e.g. {time_limit: 4h}");
  }
  bool running = job.state != JobState::kPending;
  for (const auto& kv : changes) {
    if (!kv.first.IsScalar()) {
      return Status::Invalid("body", fmt::format("a field name is a {}: field names are text, e.g. {{time_limit: 4h}}",
                                                 kv.first.IsSequence() ? "list"
                                                 : kv.first.IsMap()    ? "map"
                                                                       : "null"));
    }
    std::string field = kv.first.as<std::string>();
    if (running && field != "time_limit" && field != "time_limit_s") {
      return Status::Precondition(
          field, fmt::format("job {} is {}: only its time_limit changes", job.spec->id, ToString(job.state)));
    }
    if (!PendingFields().count(field)) {
      return Status::Invalid(
          field, fmt::format("cannot be changed after submit (these can: {})", fmt::join(PendingFields(), ", ")));
    }
  }
  return Status::Ok();
}

Answer ControllerState::Update(const Actor& who, const std::string& id, const YAML::Node& changes) {
  std::string action = "PATCH /v1/jobs/" + id;
  auto found = JobToChange(who, action, id);
  if (!found) return found.status();
  JobRecord& job = **found;
  if (IsTerminal(job.state)) {  // an array's ended first task: its id acts on every task only to stop them
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} has ended: change the array's other tasks by their "
                                                         "own ids ({}_N)",
                                                         id, id)));
  }
  if (Status s = CheckUpdate(job, changes); !s.ok()) return Refuse(who, action, id, s);
  YAML::Node merged = YAML::Load(SpecToJson(*job.spec).dump(-1, ' ', false, kReplaceBadUtf8));
  for (const auto& kv : changes) {
    std::string field = kv.first.as<std::string>();
    if (std::string other = OtherSpelling(field); !other.empty()) merged.remove(other);
    merged[field] = kv.second;
  }
  auto spec = ParseJobSpec(merged);
  Status s = spec ? Status::Ok() : spec.status();
  if (s.ok()) {
    spec->id = job.spec->id;  // as stored: the URL may spell it another way ("012", "12_3")
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
  for (const auto& kv : changes) {
    std::string field = kv.first.as<std::string>();
    changed[StoredName(field)] = SpecToJson(*spec).value(StoredName(field), nlohmann::json());
  }
  ReplaceSpec(job, std::make_shared<const JobSpec>(std::move(*spec)));
  Event(job, "updated", {{"by", who.user}, {"changes", changed}});
  Audit(who, action, id, "ok", changed.dump(-1, ' ', false, kReplaceBadUtf8));
  return ApiView(job, true);
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
