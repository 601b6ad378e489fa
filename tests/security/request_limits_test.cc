// What one request may make and what it must be: submit limits per request, per user and
// per team (429/400 naming the limit, counts that follow each job's state), strict types and
// UTF-8 in job specs, PATCH bodies whose keys are not text, and an array's id acting on
// every task not ended.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/job_arrays.h"
#include "security/security_util.h"

namespace gantry::testing {
namespace {

// The shipped scheduler_config.yaml with other submit limits.
std::string SchedulerConfigWithLimits(int per_request, int per_user, int per_team) {
  std::string yaml = ReadFileNoThrow(std::string(GANTRY_SOURCE_DIR "/config/scheduler_config.yaml")).value_or("");
  yaml = yaml.substr(0, yaml.find("submit_limits:"));
  return yaml + fmt::format(
                    "submit_limits: {{max_jobs_per_request: {}, max_waiting_per_user: {}, "
                    "max_waiting_per_team: {}}}\n",
                    per_request, per_user, per_team);
}

class RequestLimits : public ::testing::Test {
 protected:
  void Start(const std::string& scheduler_config = "") {
    std::string dir = TempPath("limits");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir, "1x4xA100-80GB,1x2xT4");
    if (!scheduler_config.empty()) std::ofstream(dir + "/config/scheduler_config.yaml") << scheduler_config;
    server_->Start();
  }
  size_t JobCount() {
    auto r = server_->Client(kRootToken).Get("/v1/jobs?limit=1");
    return Json(r).value("total", size_t{0});
  }
  std::unique_ptr<ServerProcess> server_;
};

// Before: a 1.8 KB batch of 20 arrays of 10,000 tasks made 200,000 jobs in 9 s (RSS 299 ->
// 914 MB, the database 151 -> 617 MB).
TEST_F(RequestLimits, OneRequestCannotFillTheController) {
  Start();
  nlohmann::json jobs = nlohmann::json::array();
  for (int i = 0; i < 20; ++i) jobs.push_back({{"gpus", 1}, {"array", "0-9999%4"}, {"command", "true"}});
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Post("/v1/jobs/batch", nlohmann::json{{"jobs", jobs}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json(r)["error"].value("field", ""), "submit_limits.max_jobs_per_request") << r->body;
  EXPECT_NE(r->body.find("200000 jobs"), std::string::npos) << r->body;
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(RequestLimits, WaitingJobsAreCappedPerUserAndPerTeamAndTheCountsFollowTheJobs) {
  Start(SchedulerConfigWithLimits(100, 50, 70));
  auto root = server_->Client(kRootToken);
  // Nothing starts: every node drained, so every job waits.
  for (const char* node : {"a100-80gb-0", "t4-0"}) {
    ASSERT_EQ(root.Post(fmt::format("/v1/nodes/{}/drain", node), "{}", "application/json")->status, 200);
  }
  auto alice = server_->Client(kAliceToken);
  auto lead = server_->Client(kLeadToken);
  auto submit = [](httplib::Client& c, const std::string& array) {
    return c.Post("/v1/jobs", fmt::format(R"({{"gpus": 1, "array": "{}", "command": "true"}})", array),
                  "application/json");
  };
  auto first = submit(alice, "0-39");
  ASSERT_EQ(first->status, 201) << first->body;
  auto over_user = submit(alice, "0-19");
  EXPECT_EQ(over_user->status, 429) << over_user->body;
  EXPECT_EQ(Json(over_user)["error"].value("field", ""), "submit_limits.max_waiting_per_user");
  EXPECT_NE(over_user->body.find("user alice has 40 jobs waiting"), std::string::npos) << over_user->body;
  ASSERT_EQ(submit(lead, "0-29")->status, 201);  // vision: 70 waiting
  auto over_team = submit(lead, "0");
  EXPECT_EQ(over_team->status, 429) << over_team->body;
  EXPECT_EQ(Json(over_team)["error"].value("field", ""), "submit_limits.max_waiting_per_team");
  // Another team is not held back by vision's jobs.
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(submit(bob, "0-9")->status, 201);
  // Cancelled jobs no longer count: alice may have 40 waiting again (vision: 70).
  std::string array = Json(first)["id"];
  ASSERT_EQ(alice.Delete("/v1/jobs/" + array)->status, 200);
  auto again = submit(alice, "0-39");
  EXPECT_EQ(again->status, 201) << again->body;
  // Refusals are audited.
  std::string audit = root.Get("/v1/audit?limit=100")->body;
  EXPECT_NE(audit.find("user alice has 40 jobs waiting"), std::string::npos) << audit;
}

// Before: `"array": 5` was taken, and a name with bytes that are not UTF-8 was stored with
// U+FFFD in their place.
TEST_F(RequestLimits, SpecsHaveStrictTypesAndValidUtf8) {
  Start();
  auto alice = server_->Client(kAliceToken);
  struct Case {
    std::string body, field;
  };
  const Case cases[] = {
      {R"({"gpus": 1, "array": 5, "command": "x"})", "array"},
      {"gpus: 1\narray: 7\ncommand: x\n", "array"},
      {"{\"gpus\": 1, \"name\": \"caf\xc3\", \"command\": \"x\"}", "name"},
      {"{\"gpus\": 1, \"name\": \"a\xff\xfe\", \"command\": \"x\"}", "name"},
      {"{\"gpus\": 1, \"name\": \"over\xc0\xaflong\", \"command\": \"x\"}", "name"},
      {"{\"gpus\": 1, \"command\": \"echo \xed\xa0\x80\"}", "command"},
      {"{\"gpus\": 1, \"env\": {\"A\": \"\x80\"}, \"command\": \"x\"}", "env.A"},
  };
  for (const Case& c : cases) {
    auto r = alice.Post("/v1/jobs", c.body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << c.body << " -> " << r->body;
    EXPECT_EQ(Json(r)["error"].value("field", ""), c.field) << c.body << " -> " << r->body;
  }
  EXPECT_EQ(JobCount(), 0u);
  // Text arrays and real UTF-8 are fine.
  auto ok = alice.Post("/v1/jobs",
                       "{\"gpus\": 1, \"array\": \"5\", \"name\": \"caf\xc3\xa9 \xf0\x9f\x9a\x80\", "
                       "\"command\": \"true\"}",
                       "application/json");
  ASSERT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(JobField(alice, Json(ok)["id"], "name"), "caf\xc3\xa9 \xf0\x9f\x9a\x80");
}

// Before: a PATCH whose YAML had a list or a map as a key answered 500 (bad conversion).
// Before: a dry run took any number of jobs (a 2 MiB body holds about 75,000), each checked
// and planned on the controller's thread.
TEST_F(RequestLimits, ADryRunBatchHoldsNoMoreJobsThanASubmittedOne) {
  Start();
  std::string body = "{\"jobs\": [";
  for (int i = 0; i <= kMaxArrayTasks; ++i) body += std::string(i ? "," : "") + "{\"gpus\":1}";
  body += "]}";
  auto alice = server_->Client(kAliceToken);
  for (const char* path : {"/v1/jobs/batch?dry_run=true", "/v1/jobs/batch"}) {
    auto r = alice.Post(path, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << path << " -> " << r->body.substr(0, 300);
    EXPECT_EQ(Json(r)["error"].value("field", ""), "jobs") << r->body.substr(0, 300);
  }
  EXPECT_EQ(alice.Post("/v1/jobs/batch?dry_run=true", R"({"jobs": [{"gpus": 1}]})", "application/json")->status, 200);
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(RequestLimits, PatchKeysMustBeText) {
  Start();
  auto alice = server_->Client(kAliceToken);
  auto root = server_->Client(kRootToken);
  for (const char* node : {"a100-80gb-0", "t4-0"}) {
    ASSERT_EQ(root.Post(fmt::format("/v1/nodes/{}/drain", node), "{}", "application/json")->status, 200);
  }
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "true"})", "application/json"))["id"];
  for (const char* body : {"{[1, 2]: 3}", "? {a: 1}\n: 2\n", "? [x]\n: 4h\n"}) {
    auto r = alice.Patch("/v1/jobs/" + id, body, "application/yaml");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_EQ(Json(r)["error"].value("field", ""), "body") << r->body;
  }
  EXPECT_EQ(alice.Patch("/v1/jobs/" + id, "{time_limit: 4h}", "application/yaml")->status, 200);
}

// Before: once an array's first task ended, cancel and hold of the array's id answered 409
// while its other tasks still ran.
TEST_F(RequestLimits, AnArraysIdActsOnEveryTaskNotEndedAfterItsFirstEnded) {
  Start();
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Post("/v1/jobs",
                      R"({"gpus": 1, "array": "0-2", "command": "[ \"$SLURM_ARRAY_TASK_ID\" = 0 ] || sleep 60"})",
                      "application/json");
  ASSERT_EQ(r->status, 201) << r->body;
  std::string array = Json(r)["id"];
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, array, "state"); }, "succeeded"), "succeeded");
  // Its id changes nothing of the ended task (a PATCH would have queued it again).
  auto patch = alice.Patch("/v1/jobs/" + array, "{time_limit: 4h}", "application/yaml");
  EXPECT_EQ(patch->status, 409) << patch->body;
  EXPECT_EQ(JobField(alice, array, "state"), "succeeded");
  auto hold = alice.Post("/v1/jobs/" + array + "/hold", "", "application/json");
  EXPECT_EQ(hold->status, 200) << hold->body;
  auto cancel = alice.Delete("/v1/jobs/" + array);
  EXPECT_EQ(cancel->status, 200) << cancel->body;
  auto states = [&] {
    std::multiset<std::string> all;
    nlohmann::json jobs = Json(alice.Get("/v1/jobs"));
    for (const auto& j : jobs["jobs"]) all.insert(j.value("state", ""));
    return fmt::format("{}", fmt::join(all, " "));
  };
  EXPECT_EQ(WaitUntil(states, "cancelled cancelled succeeded"), "cancelled cancelled succeeded");
  // With every task ended, the array's id is ended too.
  EXPECT_EQ(alice.Delete("/v1/jobs/" + array)->status, 409);
}

}  // namespace
}  // namespace gantry::testing
