// Role boundaries of arrays and dependencies, tried against the real server over HTTP: a
// job may not wait on another team's job (its existence is not even confirmed), another
// team's array tasks are invisible by their ARRAY_TASK ids, and cancelling an array's id
// from another team touches none of its tasks.
#include <gtest/gtest.h>

#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

using WorkflowBoundaries = ServerTest;

TEST_F(WorkflowBoundaries, AJobMayNotWaitOnAnotherTeamsJob) {
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "sleep 60"})", "application/json"))["id"];
  auto bob = server_->Client(kBobToken);
  auto r = bob.Post("/v1/jobs", R"({"gpus": 1, "command": "true", "dependency": "afterany:)" + id + R"("})",
                    "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "dependency");
  // The same words as for a job that does not exist: nothing is learnt about alice's.
  auto missing =
      bob.Post("/v1/jobs", R"({"gpus": 1, "command": "true", "dependency": "afterany:9999"})", "application/json");
  EXPECT_EQ(Json(r)["error"]["message"], "no job " + id);
  EXPECT_EQ(Json(missing)["error"]["message"], "no job 9999");
}

TEST_F(WorkflowBoundaries, AnotherTeamsArrayTasksAreInvisibleAndUntouched) {
  auto alice = server_->Client(kAliceToken);
  auto a = alice.Post("/v1/jobs", R"({"gpus": 1, "command": "sleep 60", "array": "0-2"})", "application/json");
  ASSERT_EQ(a->status, 201) << a->body;
  std::string array = Json(a)["id"];
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(bob.Get("/v1/jobs/" + array + "_1")->status, 404);
  EXPECT_EQ(bob.Delete("/v1/jobs/" + array)->status, 404);
  EXPECT_EQ(bob.Delete("/v1/jobs/" + array + "_2")->status, 404);
  EXPECT_EQ(bob.Post("/v1/jobs/" + array + "/hold", "", "text/plain")->status, 404);
  for (const char* task : {"_0", "_1", "_2"}) {
    EXPECT_NE(Json(alice.Get("/v1/jobs/" + array + task))["state"], "cancelled") << task;
  }
  EXPECT_TRUE(Json(bob.Get("/v1/queue"))["blocked"].empty());
}

}  // namespace
}  // namespace gantry::testing
