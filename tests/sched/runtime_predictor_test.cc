// RuntimePredictor: run times from jobs alike, the fallbacks, the user whose estimates are
// poor, and the time limit as a ceiling.
#include "sched/runtime_predictor.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

JobSpec Job(const std::string& user, const std::string& name, int gpus, DurationMs estimate = 0) {
  JobSpec s;
  s.user = user;
  s.name = name;
  s.command = "python train.py";
  s.request.gpus = gpus;
  s.estimated_duration_ms = estimate;
  s.time_limit_ms = 24 * kHourMs;
  return s;
}

TEST(RuntimePredictor, NothingAlikeHasRunSoTheJobKeepsItsLimit) {
  RuntimePredictor p;
  EXPECT_EQ(p.Predict(Job("ana", "train", 1)), -1);
  p.Observe(Job("ana", "train", 1), 10 * kMinuteMs);
  p.Observe(Job("ana", "train", 1), 10 * kMinuteMs);
  EXPECT_EQ(p.Predict(Job("ana", "train", 1)), -1);  // two runs are not enough
}

TEST(RuntimePredictor, ARecentPercentileOfTheSameUsersNameAndGpuCount) {
  RuntimePredictor p;
  for (int minutes : {10, 12, 30, 11}) p.Observe(Job("ana", "train", 2), minutes * kMinuteMs);
  // Sorted 10, 11, 12, 30: the 75th percentile of four is the third (index round(0.75 * 3) = 2).
  EXPECT_EQ(p.Predict(Job("ana", "train", 2)), 12 * kMinuteMs);
  // Another name: the user's 2-GPU jobs; another GPU count or user: nothing.
  EXPECT_EQ(p.Predict(Job("ana", "eval", 2)), 12 * kMinuteMs);
  EXPECT_EQ(p.Predict(Job("ana", "train", 1)), -1);
  EXPECT_EQ(p.Predict(Job("bo", "train", 2)), -1);
  JobSpec unnamed = Job("ana", "", 2);
  unnamed.command = "python eval.py";
  EXPECT_EQ(p.Predict(unnamed), 12 * kMinuteMs);
}

TEST(RuntimePredictor, TheWindowForgetsOldRunsAndTheLimitCapsThePrediction) {
  RuntimePredictor p({.window = 5, .min_samples = 3, .percentile = 0.5, .poor_estimate_factor = 2});
  for (int i = 0; i < 5; ++i) p.Observe(Job("ana", "train", 1), 10 * kHourMs);
  for (int i = 0; i < 5; ++i) p.Observe(Job("ana", "train", 1), kHourMs);  // the job got faster
  EXPECT_EQ(p.Predict(Job("ana", "train", 1)), kHourMs);
  RuntimePredictor q;
  for (int i = 0; i < 3; ++i) q.Observe(Job("ana", "train", 1), 30 * kHourMs);
  JobSpec limited = Job("ana", "train", 1);
  limited.time_limit_ms = 2 * kHourMs;
  EXPECT_EQ(q.Predict(limited), 2 * kHourMs);
}

TEST(RuntimePredictor, AUsersEstimatesAreTrustedUntilTheyProvePoor) {
  RuntimePredictor p;
  for (int i = 0; i < 3; ++i) p.Observe(Job("ana", "train", 1, 60 * kMinuteMs), 50 * kMinuteMs);
  EXPECT_FALSE(p.EstimatesPoor("ana"));
  EXPECT_EQ(p.Predict(Job("ana", "train", 1, 60 * kMinuteMs)), -1);  // her estimate stands
  // bo asks for 24 h and runs 2 h, again and again: his estimates are poor.
  for (int i = 0; i < 3; ++i) p.Observe(Job("bo", "sweep", 1, 24 * kHourMs), 2 * kHourMs);
  EXPECT_TRUE(p.EstimatesPoor("bo"));
  EXPECT_EQ(p.Predict(Job("bo", "sweep", 1, 24 * kHourMs)), 2 * kHourMs);
}

}  // namespace
}  // namespace gantry
