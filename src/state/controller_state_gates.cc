// Pending jobs kept out of the scheduler's queue (JobGates says why: state/job_gates.h):
// each cycle admits what may now be queued and fails a job whose dependency can never be
// met. Also job arrays: expansion at submit, their tasks by index, and an array's summary.
#include <fmt/format.h>

#include "state/controller_state.h"

namespace gantry {

JobTableView ControllerState::JobTable() const { return {jobs_, arrays_, kept_out_, snap_.pending, snap_.running}; }

JobPlace ControllerState::GatedPlace(const JobRecord& job) const {
  return JobGates(JobTable()).WhyKeptOut(job).code.empty() ? JobPlace::kQueued : JobPlace::kKeptOut;
}

void ControllerState::AdmitKeptOut() {
  if (!gates_dirty_ || kept_out_.empty()) return;
  gates_dirty_ = false;
  JobGates gates(JobTable());
  std::vector<uint64_t> seqs(kept_out_.begin(), kept_out_.end());
  for (uint64_t seq : seqs) {
    JobRecord& job = jobs_.at(seq);
    GateBlocker b = gates.WhyKeptOut(job);
    if (!b.code.empty() && !b.never) continue;
    if (b.never) {
      Finish(job, JobState::kFailed, b.reason);
    } else {
      MoveJob(job, {.state = JobState::kPending, .place = JobPlace::kQueued});
      if (job.array_limit > 0) gates.CountQueued(job);
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

JobsChanged ControllerState::Changed(const JobRecord& job, const std::string& named,
                                     const std::vector<JobRecord*>& tasks, size_t changed) {
  JobsChanged out{job.spec->id, named, {}, changed};
  out.tasks.reserve(tasks.size());
  for (const JobRecord* t : tasks) out.tasks.push_back(t->spec->id);
  return out;
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
