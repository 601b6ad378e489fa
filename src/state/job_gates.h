// Why a pending job is kept out of the scheduler's queue, as Slurm keeps jobs PENDING with
// a reason: held (JobHeldUser/Admin), a dependency not yet met (Dependency; or never, when
// it can no longer be met), its array at its limit of tasks at once (JobArrayTaskLimit).
// Also whether a new or changed dependency may be accepted. Pure reads over the job table:
// the state machine moves the jobs (AdmitKeptOut), the gates only say why.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sched/plan.h"
#include "state/auth.h"
#include "state/job_record.h"

namespace gantry {

// The job table the gates read: every job by seq, each array's tasks (array id -> task ->
// seq), which pending jobs are kept out, and the queued and running jobs (for singleton).
struct JobTableView {
  const std::map<uint64_t, JobRecord>& jobs;
  const std::unordered_map<uint64_t, std::map<int, uint64_t>>& arrays;
  const std::set<uint64_t>& kept_out;
  const std::vector<PendingJob>& queued;
  const std::vector<RunningJob>& running;

  // Task `task` of array `array_id`, or null.
  const JobRecord* FindTask(uint64_t array_id, int task) const;
  // A dependency target's jobs: the job, one task, or every task of an array.
  std::vector<const JobRecord*> TargetsOf(const DependencyTarget& t) const;
};

// Why a pending job is kept out: code "" when it may be queued; "held", "dependency" (with
// `never` when it can no longer be met) or "array_limit", with the words users see.
struct GateBlocker {
  std::string code;
  std::string reason;
  bool never = false;
};

// One pass over kept-out jobs. It reads the table live, but what it needs of the whole
// table (per array, its tasks queued or running; per user and name, the oldest job not
// ended) is counted once, at the first job that needs it, and then only changed by
// CountQueued: make one per pass, not one to keep.
class JobGates {
 public:
  explicit JobGates(JobTableView table) : table_(table) {}

  GateBlocker WhyKeptOut(const JobRecord& job);
  // An array task just queued: its array has one more task active in this pass.
  void CountQueued(const JobRecord& task) { array_active_[task.array_id]++; }

  // The dependency's jobs exist and are the caller's team's; aftercorr names arrays; a
  // changed job (`self`) does not come to wait for itself.
  static Status CheckDependency(const JobTableView& table, const Actor& who, const JobSpec& spec,
                                const JobRecord* self);

 private:
  GateBlocker TermBlocker(const JobRecord& job, const DependencyTerm& term);
  const JobTableView table_;
  std::unordered_map<uint64_t, int> array_active_;
  std::map<std::pair<std::string, std::string>, uint64_t> oldest_by_name_;
  bool names_scanned_ = false;
};

}  // namespace gantry
