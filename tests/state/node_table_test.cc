// The controller's node table and run-time predictions alone: indexes that only grow, what
// an agent's return or loss forgets, one reclaim notice per node; what a run teaches and
// when the waiting jobs get new predictions.
#include "state/node_table.h"

#include <gtest/gtest.h>

#include "state/run_time_predictions.h"

namespace gantry {
namespace {

TEST(NodeTable, IndexesOnlyGrowAndAnAgentsReturnOrLossForgetsWhatItSaid) {
  NodeTable nodes;
  EXPECT_EQ(nodes.Add("a", nullptr, 1000), 0);
  EXPECT_EQ(nodes.Add("b", nullptr, 2000), 1);
  EXPECT_EQ(nodes.IndexOf("b"), 1);
  EXPECT_EQ(nodes.IndexOf("c"), -1);
  EXPECT_FALSE(nodes.Knows("c"));
  EXPECT_EQ(nodes.LastHeard(1), 2000);
  nodes.Heard(1, 2500);
  EXPECT_EQ(nodes.LastHeard(1), 2500);

  GpuSample hot;
  hot.temperature_c = 91;
  nodes.Record(1, 0, hot, 2600);
  ASSERT_NE(nodes.ReadingOf(1, 0), nullptr);
  EXPECT_EQ(nodes.ReadingOf(1, 0)->sample.temperature_c, 91);
  EXPECT_EQ(nodes.ReadingOf(1, 0)->at, 2600);
  EXPECT_EQ(nodes.ReadingOf(1, 1), nullptr);
  EXPECT_EQ(nodes.ReadingOf(0, 0), nullptr);

  // Re-registered: GPU indexes may mean other GPUs now.
  nodes.Attach(1, nullptr);
  EXPECT_EQ(nodes.ReadingOf(1, 0), nullptr);

  EXPECT_TRUE(nodes.NoteReclaim(0));
  EXPECT_FALSE(nodes.NoteReclaim(0));  // one notice is enough
  EXPECT_TRUE(nodes.Reclaiming(0));
  nodes.Record(0, 3, hot, 2700);
  nodes.Detach(0);  // lost: no link, no readings, no notice
  EXPECT_EQ(nodes.Link(0), nullptr);
  EXPECT_EQ(nodes.ReadingOf(0, 3), nullptr);
  EXPECT_FALSE(nodes.Reclaiming(0));
  EXPECT_EQ(nodes.IndexOf("a"), 0);  // it keeps its index for its return
  EXPECT_EQ(nodes.size(), 2u);
}

JobRecord Ran(const std::string& id, JobState state, DurationMs ran) {
  JobSpec spec;
  spec.id = id;
  spec.user = "ana";
  spec.name = "train";
  JobRecord job;
  job.spec = std::make_shared<const JobSpec>(spec);
  job.state = state;
  job.start_ms = 1000;
  job.end_ms = 1000 + ran;
  return job;
}

TEST(RunTimePredictions, OnlySucceededRunsTeachAndWaitingJobsHearOfItOnce) {
  RunTimePredictions predictions;
  JobSpecPtr waiting = Ran("9", JobState::kPending, 0).spec;
  EXPECT_EQ(predictions.Apply(waiting), waiting);  // nothing alike ran: the same spec
  EXPECT_FALSE(predictions.TakeNews());
  predictions.Learn(Ran("1", JobState::kFailed, 60'000));
  predictions.Learn(Ran("2", JobState::kCancelled, 60'000));
  EXPECT_FALSE(predictions.TakeNews());  // neither is a run time
  for (int i = 0; i < 3; ++i) predictions.Learn(Ran(std::to_string(3 + i), JobState::kSucceeded, 600'000));
  EXPECT_TRUE(predictions.TakeNews());
  EXPECT_FALSE(predictions.TakeNews());  // taken
  JobSpecPtr planned = predictions.Apply(waiting);
  ASSERT_NE(planned, waiting);
  EXPECT_EQ(planned->predicted_duration_ms, 600'000);
  EXPECT_EQ(predictions.Apply(planned), planned);  // already current
}

}  // namespace
}  // namespace gantry
