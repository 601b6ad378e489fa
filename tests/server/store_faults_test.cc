// The controller against a store that fails on command (faulty_store.h): a commit that fails
// ends the server before anyone is told their change was made, and a restart finds exactly
// what was acknowledged; a slow disk makes the commits fewer and larger (group commit), not
// the changes fewer; a store whose reads fail answers those reads with its error and the
// controller goes on.
#include <gtest/gtest.h>

#include <thread>

#include "controller_harness.h"
#include "server/faulty_store.h"

namespace gantry::testing {
namespace {

std::unique_ptr<Controller> StartOn(const std::string& db, std::shared_ptr<StoreFaults> faults) {
  ControllerOptions o = HarnessOptions();
  auto sqlite = OpenSqliteStore(db, {.synchronous_full = false});
  if (!sqlite.ok()) return nullptr;
  auto c = std::make_unique<Controller>(std::move(o), std::make_unique<FaultyStore>(std::move(*sqlite), faults));
  if (!c->Recover().ok()) return nullptr;
  c->Start();
  return c;
}

JobSpec OneGpu() { return *ParseJobSpecText("gpus: 1\ncommand: sleep 60\ntime_limit: 1h\n"); }

TEST(StoreFaults, AFailedCommitEndsTheServerBeforeItsChangeIsAcknowledged) {
  const std::string db = Harness::Fresh();
  // The controller runs in the death test's child only: this process starts no thread.
  EXPECT_EXIT(
      {
        auto faults = std::make_shared<StoreFaults>();
        auto c = StartOn(db, faults);
        if (!c || !c->Submit(kAlice, OneGpu(), "").ok()) std::exit(3);  // job 1: durable
        faults->fail_commits = 1;
        c->Submit(kAlice, OneGpu(), "");  // job 2: its commit fails
        std::exit(4);                     // not reached: nobody is told job 2 was made
      },
      ::testing::ExitedWithCode(75), "store commit failed, exiting: .*the disk is full");
  // A restart finds job 1 and nothing of job 2; the next job takes id 2.
  auto c = StartOn(db, std::make_shared<StoreFaults>());
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->GetJob(kAlice, "1").ok());
  EXPECT_EQ(c->GetJob(kAlice, "2").status().code(), StatusCode::kNotFound);
  auto next = c->Submit(kAlice, OneGpu(), "");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->job.value("id", ""), "2");
}

TEST(StoreFaults, OnASlowDiskChangesQueuedDuringACommitGoInTheNextOne) {
  auto faults = std::make_shared<StoreFaults>();
  auto c = StartOn(Harness::Fresh(), faults);
  ASSERT_TRUE(c);
  faults->commit_delay_ms = 150;
  const int before = faults->commits;
  std::vector<std::thread> callers;
  std::atomic<int> made{0};
  for (int i = 0; i < 24; ++i) {
    callers.emplace_back([&] { made += c->Submit(kAlice, OneGpu(), "").ok(); });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(made, 24);
  // Each submit was acknowledged only once durable, and the callers waiting on one slow
  // commit shared the next one: far fewer commits than submits.
  EXPECT_LT(faults->commits - before, 12) << "commits for 24 concurrent submits";
  auto jobs = c->ListJobs(kAdmin, JobFilter{});
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->value("total", 0), 24);
}

TEST(StoreFaults, ReadsThatFailAnswerTheStoresErrorAndTheControllerGoesOn) {
  auto faults = std::make_shared<StoreFaults>();
  auto c = StartOn(Harness::Fresh(), faults);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->Submit(kAlice, OneGpu(), "").ok());
  faults->fail_reads = true;
  Answer audit = c->AuditLog(kAdmin, 10);
  ASSERT_FALSE(audit.ok());
  EXPECT_EQ(audit.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(audit.status().message().find("does not answer"), std::string::npos) << audit.status().ToString();
  EXPECT_EQ(c->Events(kAlice, "1").status().code(), StatusCode::kUnavailable);
  // Changes still commit, and reads answer again once the store does.
  ASSERT_TRUE(c->Submit(kAlice, OneGpu(), "").ok());
  faults->fail_reads = false;
  audit = c->AuditLog(kAdmin, 10);
  ASSERT_TRUE(audit.ok()) << audit.status().ToString();
  EXPECT_EQ((*audit)["audit"].size(), 2u);
}

}  // namespace
}  // namespace gantry::testing
