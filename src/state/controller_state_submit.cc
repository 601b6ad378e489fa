// Submits: one job or a batch (a jobs file), all or none, checked as one; the replay of a
// retried submit (Idempotency-Key); and the dry run that says what a submit would do now:
// refused and why, or where the job would start, or why it would wait.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <set>

#include "state/controller_state.h"

namespace gantry {

namespace {

// A refusal of the batch's job `i`, naming it: "jobs[2].gpus".
Status OfBatchJob(size_t i, const Status& s) {
  std::string field = s.field().empty() ? fmt::format("jobs[{}]", i) : fmt::format("jobs[{}].{}", i, s.field());
  return Status(s.code(), fmt::format("job {} of the batch: {}", i + 1, s.message()), field);
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// A GPU type the catalog does not know is refused naming the types this cluster has (not
// every type Gantry knows), and those it may have meant: 'a100' -> A100-80GB.
Status CheckGpuTypesKnown(const JobSpec& spec, const GpuCatalog& catalog, const std::vector<Node>& nodes) {
  for (const std::string& name : spec.request.gpu_types) {
    if (catalog.Find(name)) continue;
    std::set<std::string> here;
    for (const Node& n : nodes) {
      for (const Gpu& g : n.gpus) here.insert(catalog.Get(g.type).name);
    }
    std::vector<std::string> meant;
    for (const std::string& h : here) {
      if (!name.empty() && Lower(h).find(Lower(name)) != std::string::npos) meant.push_back(h);
    }
    return Status::Invalid(
        "gpu_types", fmt::format("unknown GPU type '{}'{}; this cluster has {}", name.substr(0, 64),
                                 meant.empty() ? "" : fmt::format(" (did you mean {}?)", fmt::join(meant, " or ")),
                                 here.empty() ? "no GPUs yet" : fmt::format("{}", fmt::join(here, ", "))));
  }
  return Status::Ok();
}

std::vector<std::string> SplitIds(const std::string& ids) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ids.size()) {
    size_t comma = ids.find(',', start);
    out.push_back(ids.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

// GPU indices mean one machine's GPUs, as single-machine queues use them: only on a
// server with exactly one node, and only indices that node has.
Status ControllerState::CheckPinnedGpus(const JobSpec& spec) const {
  const std::vector<int>& pinned = spec.request.gpu_indices;
  if (pinned.empty()) return Status::Ok();
  if (snap_.nodes.size() != 1) {
    return Status::Invalid("gpu_indices", fmt::format("GPU indices pin GPUs on a single-node server; this cluster has "
                                                      "{} nodes: give GPU types or a count instead",
                                                      snap_.nodes.size()));
  }
  int count = static_cast<int>(snap_.nodes.front().gpus.size());
  if (pinned.back() >= count) {
    return Status::Invalid(
        "gpu_indices", fmt::format("node {} has GPUs 0..{}, not {}", snap_.nodes.front().id, count - 1, pinned.back()));
  }
  return Status::Ok();
}

Status ControllerState::CheckNewJob(const Actor& who, JobSpec& spec) const {
  if (!spec.id.empty()) return Status::Invalid("id", "is assigned by the server");
  if (!spec.kube_pods.empty()) {
    return Status::Invalid("kube_pods", "is set by the server for the Kubernetes pods it schedules");
  }
  Status s = CheckSubmitter(who, spec);
  if (s.ok()) s = CheckGpuTypesKnown(spec, options_.config.catalog, snap_.nodes);
  if (s.ok()) s = ValidateJobSpec(spec, options_.config.catalog, options_.config.scheduler);
  if (s.ok()) s = CheckTeamPermissions(who, spec);
  if (s.ok()) s = CheckNotifyTarget(who, spec);
  if (s.ok()) s = CheckPinnedGpus(spec);
  if (s.ok()) s = CheckAdmissibleNow(spec);
  if (s.ok()) s = CheckQuotaAdmissible(spec, *quotas_, options_.config.catalog);
  if (s.ok()) s = JobGates::CheckDependency(JobTable(), who, spec, nullptr);
  if (s.ok() && spec.command.empty() && spec.hold_gpus_ms == 0) {
    s = Status::Invalid("command",
                        "is missing: give the command to run (after -- on the CLI), or hold_gpus: "
                        "DURATION (--hold-gpus) to hold the GPUs without one");
  }
  return s;
}

Expected<Submitted> ControllerState::Submit(const Actor& who, JobSpec spec, const std::string& key,
                                            const std::string& hash) {
  std::vector<JobSpec> one;
  one.push_back(std::move(spec));
  return SubmitBatch(who, std::move(one), key, hash, false);
}

Expected<Submitted> ControllerState::SubmitBatch(const Actor& who, std::vector<JobSpec> specs, const std::string& key,
                                                 const std::string& hash, bool batch) {
  const std::string action = ActionWords(batch ? StateAction::kSubmitBatch : StateAction::kSubmit, "");
  if (InvalidUtf8At(key) >= 0) {  // a stored key is text (the HTTP layer refuses it first)
    return Refuse(who, action, "", Status::Invalid("Idempotency-Key", "must be UTF-8 text"));
  }
  if (!key.empty()) {
    auto it = idempotency_.find(who.user + "\n" + key);
    if (it != idempotency_.end()) {
      if (it->second.second != hash) {
        return Refuse(
            who, action, "",
            {StatusCode::kKeyReused, "Idempotency-Key was used before with a different job spec", "Idempotency-Key"});
      }
      Submitted replay{SubmittedView(SplitIds(it->second.first), batch), false};
      replay.job["idempotent_replay"] = true;
      return replay;
    }
  }
  if (specs.empty() || specs.size() > static_cast<size_t>(kMaxArrayTasks)) {
    return Refuse(who, action, "", Status::Invalid("jobs", fmt::format("a batch holds 1..{} jobs", kMaxArrayTasks)));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (Status s = CheckNewJob(who, specs[i]); !s.ok()) return Refuse(who, action, "", batch ? OfBatchJob(i, s) : s);
  }
  if (Status s = CheckSubmitLimits(specs); !s.ok()) return Refuse(who, action, "", s);
  std::vector<std::string> ids;
  for (JobSpec& spec : specs) {
    const bool held = spec.submit_held;
    if (spec.array.empty()) {
      JobRecord& job = AddJob(who, std::move(spec));
      if (held) HoldOne(who, job);
      ids.push_back(job.spec->id);
      Audit(who, action, ids.back(), "created");
    } else {
      std::vector<uint64_t> tasks = AddArray(who, spec);
      for (uint64_t task : tasks) {
        if (JobRecord* job = held ? Find(std::to_string(task)) : nullptr) HoldOne(who, *job);
      }
      ids.push_back(std::to_string(tasks.front()));
      Audit(who, action, ids.back(), "created", fmt::format("array of {} tasks", tasks.size()));
    }
  }
  if (!key.empty()) {
    std::string joined = fmt::format("{}", fmt::join(ids, ","));
    idempotency_[who.user + "\n" + key] = {joined, hash};
    batch_.idempotency.push_back({who.user, key, joined, hash, now_});
  }
  return Submitted{SubmittedIds(ids, batch), true};
}

Status ControllerState::CheckSubmitLimits(const std::vector<JobSpec>& specs) const {
  const SchedulerConfig& c = options_.config.scheduler;
  size_t jobs = 0;
  std::map<std::string, size_t> by_user, by_team;  // a batch may hold several users' jobs (an admin's)
  for (const JobSpec& spec : specs) {
    size_t n = spec.array.empty() ? 1 : ParseArraySpec(spec.array)->tasks.size();
    jobs += n;
    by_user[spec.user] += n;
    by_team[spec.team] += n;
  }
  if (c.max_jobs_per_request > 0 && jobs > static_cast<size_t>(c.max_jobs_per_request)) {
    return Status::Invalid("submit_limits.max_jobs_per_request",
                           fmt::format("this request would make {} jobs (array tasks count one each); at most {} "
                                       "per request: split it, or use a smaller array",
                                       jobs, c.max_jobs_per_request));
  }
  auto waiting = [](const std::unordered_map<std::string, int>& counts, const std::string& key) {
    auto it = counts.find(key);
    return it == counts.end() ? size_t{0} : static_cast<size_t>(it->second);
  };
  auto check = [&](int limit, const char* name, const char* kind, const std::map<std::string, size_t>& adding,
                   const std::unordered_map<std::string, int>& counts) {
    for (const auto& [key, more] : adding) {
      size_t have = waiting(counts, key);
      if (limit > 0 && have + more > static_cast<size_t>(limit)) {
        return Status(StatusCode::kOverLimit,
                      fmt::format("{} {} has {} jobs waiting; {} more would pass the limit of {}: wait for some to "
                                  "start, or cancel some",
                                  kind, key, have, more, limit),
                      std::string("submit_limits.") + name);
      }
    }
    return Status::Ok();
  };
  Status s = check(c.max_waiting_per_user, "max_waiting_per_user", "user", by_user, waiting_by_user_);
  if (s.ok()) s = check(c.max_waiting_per_team, "max_waiting_per_team", "team", by_team, waiting_by_team_);
  return s;
}

nlohmann::json ControllerState::SubmittedIds(const std::vector<std::string>& ids, bool batch) {
  return batch ? nlohmann::json{{"ids", ids}} : nlohmann::json{{"id", ids.front()}};
}

nlohmann::json ControllerState::SubmittedView(const std::vector<std::string>& ids, bool batch) {
  if (!batch) return JobView(ids.front());
  nlohmann::json jobs = nlohmann::json::array();
  for (const std::string& id : ids) jobs.push_back(JobView(id));
  return nlohmann::json{{"jobs", jobs}};
}

nlohmann::json ControllerState::DryRun(const Actor& who, std::vector<Expected<JobSpec>> specs) {
  MergeNewPending();
  Snapshot what_if = snap_;
  what_if.now_ms = now_;
  nlohmann::json out = nlohmann::json::array();
  std::vector<size_t> queued;  // out index of each job added to what_if.pending
  for (size_t i = 0; i < specs.size(); ++i) {
    nlohmann::json verdict = {{"index", i}};
    Status s = specs[i] ? CheckNewJob(who, *specs[i]) : specs[i].status();
    if (!s.ok()) {
      verdict["ok"] = false;
      verdict["error"] = {{"field", s.field()}, {"message", s.message()}};
      out.push_back(std::move(verdict));
      continue;
    }
    JobSpec& spec = *specs[i];
    verdict["ok"] = true;
    verdict["spec"] = SpecToJson(spec);
    if (!spec.array.empty()) verdict["tasks"] = ParseArraySpec(spec.array)->tasks.size();
    if (!spec.dependency.empty()) {
      verdict["would_start"] = false;
      verdict["reason"] = "waits for its dependency: " + spec.dependency;
    } else {
      spec.id = fmt::format("dry-run-{}", i);
      what_if.pending.push_back({std::make_shared<const JobSpec>(std::move(spec)), now_});
      queued.push_back(out.size());
    }
    out.push_back(std::move(verdict));
  }
  if (!queued.empty()) {
    Plan plan = engine_->Schedule(what_if, {.explain = true, .pending_in_order = false});
    std::map<std::string, size_t> slot;
    for (size_t q = 0; q < queued.size(); ++q)
      slot[fmt::format("dry-run-{}", out[queued[q]]["index"].get<size_t>())] = queued[q];
    for (const StartDecision& d : plan.starts) {
      auto it = slot.find(d.job_id);
      if (it == slot.end()) continue;
      out[it->second]["would_start"] = true;
      out[it->second]["placement"] = PlacementToJson(d.placement, what_if.nodes, options_.config.catalog);
    }
    for (const WaitingJob& w : plan.waiting) {
      auto it = slot.find(w.job_id);
      if (it == slot.end()) continue;
      out[it->second]["would_start"] = false;
      out[it->second]["reason"] = plan.reason(w);
      if (w.estimated_start_ms != kNever) out[it->second]["estimated_start"] = FormatUtc(w.estimated_start_ms);
    }
  }
  return nlohmann::json{{"dry_run", true}, {"jobs", out}};
}

}  // namespace gantry
