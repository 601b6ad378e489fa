// Run-time predictions in the live server: jobs that succeeded teach the controller how
// long jobs alike run, so a waiting job's estimated start follows them instead of a 24 h
// limit, and a restart learns it again from the store.
#include <gtest/gtest.h>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

constexpr const char* kTrain = "{name: train, gpus: 1, command: 'python train.py'}";

// Runs `kTrain` jobs one after the other on the one GPU, each for `minutes`.
void RunAlike(Harness& h, int count, int minutes) {
  for (int i = 0; i < count; ++i) {
    ApiAnswer r = h.Submit(kTrain, kAlice);
    ASSERT_EQ(r.body["state"], "running") << r.body.dump();
    h.now = h.now + minutes * kMinuteMs;
    h.controller->RunExited(ExitReport(r.body["id"], 1, "n1", 0, ""));
    h.controller->Sync();
    ASSERT_EQ(h.State(r.body["id"], kAlice), "succeeded");
  }
}

TEST(Prediction, AWaitingJobsEstimatedStartFollowsTheRunsOfJobsAlike) {
  std::string db = Harness::Fresh();
  std::string waiting;
  TimeMs started = 0;
  {
    Harness h(db);
    h.Attach({MakeNode("n1", "A100-80GB", 1)});
    // Before any history, a job without an estimate is planned at its time limit (hours).
    ApiAnswer first = h.Submit(kTrain, kAlice);
    ApiAnswer behind = h.Submit(kTrain, kAlice);
    nlohmann::json q = Api(h.controller->Queue(kAlice)).body["queue"][0];
    TimeMs estimated = 0;
    ASSERT_TRUE(ParseUtc(q.value("estimated_start", ""), &estimated)) << q.dump();
    EXPECT_GE(estimated, h.now + 12 * kHourMs);
    h.controller->Cancel(kAlice, behind.body["id"]);
    h.now = h.now + 10 * kMinuteMs;
    h.controller->RunExited(ExitReport(first.body["id"], 1, "n1", 0, ""));
    h.controller->Sync();
    RunAlike(h, 3, 10);
    // Now a train job runs and another waits: planned with the 10 minutes jobs alike ran.
    ApiAnswer running = h.Submit(kTrain, kAlice);
    started = h.now;
    EXPECT_DOUBLE_EQ(running.body["predicted_duration_s"], 600.0) << running.body.dump();
    waiting = h.Submit(kTrain, kAlice).body["id"];
    q = Api(h.controller->Queue(kAlice)).body["queue"][0];
    EXPECT_EQ(q["id"], waiting);
    EXPECT_EQ(q["estimated_start"], FormatUtc(started + 10 * kMinuteMs)) << q.dump();
    // A job with an estimate of its own keeps it.
    ApiAnswer own = h.Submit("{name: train, gpus: 1, estimated_duration: 30m, command: 'python train.py'}", kAlice);
    EXPECT_FALSE(own.body.contains("predicted_duration_s")) << own.body.dump();
    h.controller->Stop();
  }
  // After a restart the store's finished jobs teach it again.
  Harness h(db, 3600'000, {}, started + kMinuteMs);
  ApiAnswer job = Api(h.controller->GetJob(kAlice, waiting));
  EXPECT_DOUBLE_EQ(job.body["predicted_duration_s"], 600.0) << job.body.dump();
}

}  // namespace
}  // namespace gantry::testing
