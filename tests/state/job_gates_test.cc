// The gates alone, over a job table built by hand: holds, each dependency kind (waiting,
// met, never met), singleton, an array's limit, and which dependencies are accepted.
#include "state/job_gates.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gantry {
namespace {

class JobGatesTest : public ::testing::Test {
 protected:
  // Job `seq` of `user` in team vision, in `state`, waiting on `dependency` (if any).
  JobRecord& Add(uint64_t seq, JobState state, const std::string& dependency = "", const std::string& name = "") {
    JobSpec spec;
    spec.id = std::to_string(seq);
    spec.user = "ana";
    spec.team = "vision";
    spec.name = name.empty() ? "job" + spec.id : name;
    spec.dependency = dependency;
    JobRecord& job = jobs_[seq];
    job.seq = seq;
    job.spec = std::make_shared<const JobSpec>(spec);
    job.state = state;
    if (!dependency.empty()) job.after = *ParseDependency(dependency);
    if (state == JobState::kPending && !dependency.empty()) kept_out_.insert(seq);
    return job;
  }
  JobTableView Table() const { return {jobs_, arrays_, kept_out_, queued_, running_}; }
  GateBlocker Why(uint64_t seq) { return JobGates(Table()).WhyKeptOut(jobs_.at(seq)); }

  std::map<uint64_t, JobRecord> jobs_;
  std::unordered_map<uint64_t, std::map<int, uint64_t>> arrays_;
  std::set<uint64_t> kept_out_;
  std::vector<PendingJob> queued_;
  std::vector<RunningJob> running_;
};

TEST_F(JobGatesTest, AHoldSaysWhoMayReleaseIt) {
  Add(1, JobState::kPending).hold = "user";
  EXPECT_EQ(Why(1).code, "held");
  EXPECT_EQ(Why(1).reason, "held (gantry release 1)");
  jobs_[1].hold = "admin";
  EXPECT_EQ(Why(1).reason, "held by an admin");
}

TEST_F(JobGatesTest, EachDependencyKindWaitsIsMetOrCanNeverBeMet) {
  Add(1, JobState::kRunning).runs = 1;
  Add(2, JobState::kPending, "afterok:1");
  Add(3, JobState::kPending, "afternotok:1");
  Add(4, JobState::kPending, "after:1");
  Add(5, JobState::kPending, "afterany:1");
  EXPECT_EQ(Why(2).reason, "afterok: waits for job 1 to succeed");
  EXPECT_EQ(Why(3).reason, "afternotok: waits for job 1 to fail");
  EXPECT_EQ(Why(4).code, "");  // it started
  EXPECT_EQ(Why(5).reason, "afterany: waits for job 1 to end");
  jobs_[1].state = JobState::kSucceeded;
  EXPECT_EQ(Why(2).code, "");
  GateBlocker never = Why(3);
  EXPECT_TRUE(never.never);
  EXPECT_EQ(never.reason, "dependency never satisfied: job 1 succeeded (afternotok)");
  EXPECT_EQ(Why(5).code, "");
  jobs_[1].state = JobState::kFailed;
  EXPECT_TRUE(Why(2).never);
  EXPECT_EQ(Why(3).code, "");
}

TEST_F(JobGatesTest, ASingletonWaitsForTheOldestJobOfItsNameAndUser) {
  Add(1, JobState::kRunning, "", "sweep");
  running_.push_back(RunningJob{});
  running_.back().spec = jobs_[1].spec;
  Add(2, JobState::kPending, "singleton", "sweep");
  EXPECT_EQ(Why(2).reason, "singleton: waits for job 1 (also ana's 'sweep') to end");
  running_.clear();
  jobs_[1].state = JobState::kSucceeded;
  EXPECT_EQ(Why(2).code, "");
}

TEST_F(JobGatesTest, AnArrayRunsAtMostItsLimitOfTasksAtOnceCountedOncePerPass) {
  for (uint64_t seq = 10; seq < 14; ++seq) {
    JobRecord& task = Add(seq, seq < 12 ? JobState::kRunning : JobState::kPending);
    task.array_id = 10;
    task.array_task = static_cast<int>(seq - 10);
    task.array_limit = 2;
    arrays_[10][task.array_task] = seq;
    if (seq >= 12) kept_out_.insert(seq);
  }
  EXPECT_EQ(Why(12).reason, "array 10 runs at most 2 tasks at once");
  jobs_[10].state = JobState::kSucceeded;
  JobGates pass(Table());
  EXPECT_EQ(pass.WhyKeptOut(jobs_[12]).code, "");
  pass.CountQueued(jobs_[12]);  // queued in this pass: the limit is reached again
  EXPECT_EQ(pass.WhyKeptOut(jobs_[13]).code, "array_limit");
}

TEST_F(JobGatesTest, ADependencyIsAcceptedOnlyOnVisibleJobsAndWithoutACycle) {
  Add(1, JobState::kRunning);
  JobRecord& other = Add(2, JobState::kRunning);
  JobSpec theirs = *other.spec;
  theirs.team = "nlp";
  other.spec = std::make_shared<const JobSpec>(theirs);
  Actor ana{"ana", "vision"};
  JobSpec spec;
  spec.dependency = "afterok:1";
  EXPECT_TRUE(JobGates::CheckDependency(Table(), ana, spec, nullptr).ok());
  for (const char* dependency : {"afterok:2", "afterok:99"}) {  // another team's job is no job to ana
    spec.dependency = dependency;
    Status s = JobGates::CheckDependency(Table(), ana, spec, nullptr);
    EXPECT_EQ(s.field(), "dependency");
    EXPECT_EQ(s.message(), fmt::format("no job {}", std::string(dependency).substr(8)));
  }
  spec.dependency = "aftercorr:1";
  EXPECT_EQ(JobGates::CheckDependency(Table(), ana, spec, nullptr).message(),
            "aftercorr is for arrays: task i of this array waits for task i of another");
  // aftercorr pairs task i with task i: it names a whole array, not one of its tasks.
  JobRecord& task = Add(20, JobState::kRunning);
  task.array_id = 20;
  task.array_task = 4;
  arrays_[20][4] = 20;
  spec.array = "0-7";
  spec.dependency = "aftercorr:20";
  EXPECT_TRUE(JobGates::CheckDependency(Table(), ana, spec, nullptr).ok());
  spec.dependency = "aftercorr:20_4";  // refused as it is read: the gate would ignore the _4
  EXPECT_NE(JobGates::CheckDependency(Table(), ana, spec, nullptr).message().find("aftercorr names a whole array"),
            std::string::npos);
  spec.array.clear();
  // Job 3 waits for 1; 1 may not come to wait for 3.
  Add(3, JobState::kPending, "afterok:1");
  spec.dependency = "afterok:3";
  EXPECT_EQ(JobGates::CheckDependency(Table(), ana, spec, &jobs_[1]).message(), "job 3 waits for this job: a cycle");
}

}  // namespace
}  // namespace gantry
