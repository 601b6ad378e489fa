// A change to a submitted job, parsed as a submit's fields are: only the fields that may
// change after submit, each read and refused as at submit, and set on a spec with the
// rules a submit's parse keeps between them.
#include "core/job_changes.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace gantry {
namespace {

TEST(JobChanges, EachFieldIsReadAsASubmitReadsIt) {
  auto c = ParseJobChangesText(
      "{name: sweep-7, priority: high, time_limit: 2h, estimated_duration_s: 90, gpu_types: [T4, L4], "
      "cost_limit: 12.5, dependency: 'afterok:3'}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->fields.size(), 7u);
  EXPECT_EQ(c->name, "sweep-7");
  EXPECT_EQ(c->priority_class, "high");
  EXPECT_EQ(c->time_limit_ms, 2 * kHourMs);
  EXPECT_EQ(c->estimated_duration_ms, 90 * kSecondMs);
  EXPECT_EQ(c->gpu_types, (std::vector<std::string>{"T4", "L4"}));
  EXPECT_EQ(c->cost_limit, 12.5);
  EXPECT_EQ(c->dependency, "afterok:3");
  EXPECT_FALSE(c->OnlyTimeLimit());
  auto unlimited = ParseJobChangesText("{time_limit: unlimited}");
  ASSERT_TRUE(unlimited.ok());
  EXPECT_EQ(unlimited->time_limit_ms, kTimeLimitAsAllowed);
  EXPECT_TRUE(unlimited->OnlyTimeLimit());
  EXPECT_TRUE(ParseJobChangesText("{time_limit_s: 60}")->OnlyTimeLimit());
}

TEST(JobChanges, RefusalsNameTheField) {
  struct Case {
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {"{command: 'rm -rf /'}", "command"},                    // fixed at submit
      {"{gpus: 8}", "gpus"},                                   // fixed at submit
      {"{time_limit: -5m}", "time_limit"},                     // read as a submit reads it
      {"{time_limit: 1h, time_limit_s: 60}", "time_limit_s"},  // one spelling
      {"{cost_limit: [1]}", "cost_limit"},
      {"{dependency: 'afterwards:3'}", "dependency"},
      {"[1, 2]", "body"},
      {"{}", "body"},
      {"{[a]: 1}", "body"},
      {"{!}", "body"},       // a field named "" (found by fuzz_job_spec)
      {"{name: a", "body"},  // not YAML
  };
  for (const Case& c : cases) {
    auto parsed = ParseJobChangesText(c.body);
    ASSERT_FALSE(parsed.ok()) << c.body;
    EXPECT_EQ(parsed.status().field(), c.field) << c.body << " -> " << parsed.status().ToString();
  }
}

TEST(JobChanges, AppliedWithTheRulesBetweenFields) {
  JobSpec spec;
  spec.name = "before";
  spec.time_limit_ms = 4 * kHourMs;
  auto c = ParseJobChangesText("{name: after, time_limit: 1h}");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->ApplyTo(spec).ok());
  EXPECT_EQ(spec.name, "after");
  EXPECT_EQ(spec.time_limit_ms, kHourMs);
  // A job that holds its GPUs for 2h: its time limit cannot be shorter than the hold, and
  // an estimate of 0 is the hold's length (as at submit).
  JobSpec hold;
  hold.hold_gpus_ms = 2 * kHourMs;
  hold.time_limit_ms = 3 * kHourMs;
  hold.estimated_duration_ms = 2 * kHourMs;
  Status shorter = ParseJobChangesText("{time_limit: 1h}")->ApplyTo(hold);
  EXPECT_EQ(shorter.field(), "time_limit") << shorter.ToString();
  JobSpec hold2 = hold;
  ASSERT_TRUE(ParseJobChangesText("{estimated_duration: 0}")->ApplyTo(hold2).ok());
  EXPECT_EQ(hold2.estimated_duration_ms, 2 * kHourMs);
  ASSERT_TRUE(ParseJobChangesText("{time_limit: unlimited}")->ApplyTo(hold2).ok());
  EXPECT_EQ(hold2.time_limit_ms, kTimeLimitAsAllowed);
}

}  // namespace
}  // namespace gantry
