// Role boundaries of the dashboard, tried against the real server over HTTP: its page loads
// without a token but shows nothing without one (every number comes from the API with the
// signed-in token), and the views it reads (queue, nodes, GPUs, job search, teams) never
// show a user another team's jobs; bad query values are refused naming the parameter.
#include <gtest/gtest.h>

#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

using DashboardBoundaries = ServerTest;

TEST_F(DashboardBoundaries, ThePageLoadsWithoutATokenButItsDataNeedsOne) {
  auto anyone = server_->Client(nullptr);
  auto page = anyone.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page->body.find("token"), std::string::npos);  // nothing secret in the page
  EXPECT_EQ(anyone.Get("/ui/app.js")->status, 200);
  EXPECT_EQ(anyone.Get("/ui/../data/admin.token")->status, 404);
  EXPECT_EQ(anyone.Get("/ui/%2e%2e/data/admin.token")->status, 404);
  for (const char* path : {"/v1/teams", "/v1/history", "/v1/nodes?telemetry=true", "/v1/queue"}) {
    EXPECT_EQ(anyone.Get(path)->status, 401) << path;
  }
}

TEST_F(DashboardBoundaries, AUserSeesNoOtherTeamsJobInAnyViewTheDashboardReads) {
  auto alice = server_->Client(kAliceToken);
  auto bob = server_->Client(kBobToken);
  // Bob's job runs on an A100; a second waits for the whole A100 node.
  std::string running = Json(bob.Post("/v1/jobs",
                                      R"({"name": "nlp-secret", "gpus": 1, "gpu_types": ["A100-80GB"],
                                          "command": "sleep 60"})",
                                      "application/json"))["id"];
  ASSERT_EQ(WaitFor(running, "running", kBobToken), "running");
  std::string waiting = Json(bob.Post("/v1/jobs",
                                      R"({"name": "nlp-secret-2", "gpus": 4, "gpu_types": ["A100-80GB"],
                                          "command": "true"})",
                                      "application/json"))["id"];
  ASSERT_FALSE(waiting.empty());
  for (const char* path : {"/v1/queue", "/v1/nodes?telemetry=true", "/v1/nodes/a100-80gb-0/gpus", "/v1/teams",
                           "/v1/jobs?q=nlp", "/v1/jobs?state=active"}) {
    auto r = alice.Get(path);
    ASSERT_EQ(r->status, 200) << path << r->body;
    EXPECT_EQ(r->body.find("nlp-secret"), std::string::npos) << path << r->body;
    EXPECT_EQ(r->body.find("\"bob\""), std::string::npos) << path << r->body;
    EXPECT_EQ(r->body.find("\"job\":\"" + running + "\""), std::string::npos) << path << r->body;
    EXPECT_EQ(r->body.find("\"id\":\"" + waiting + "\""), std::string::npos) << path << r->body;
  }
  nlohmann::json queue = Json(alice.Get("/v1/queue"));
  EXPECT_TRUE(queue["queue"].empty());
  EXPECT_EQ(queue["other_teams_waiting"], 1);
  // Bob sees his own, named.
  EXPECT_NE(bob.Get("/v1/queue")->body.find("nlp-secret-2"), std::string::npos);
}

TEST_F(DashboardBoundaries, BadQueryValuesAreRefusedNamingTheParameter) {
  auto alice = server_->Client(kAliceToken);
  struct Case {
    std::string path, field;
  };
  for (const Case& c : std::vector<Case>{{"/v1/history?range=1y", "range"},
                                         {"/v1/history?since=1", "since"},
                                         {"/v1/nodes?telemetry=yes", "telemetry"},
                                         {"/v1/nodes?limit=0", "limit"},
                                         {"/v1/queue?offset=-1", "offset"},
                                         {"/v1/queue?limit=99999", "limit"},
                                         {"/v1/jobs?q=" + std::string(201, 'x'), "q"},
                                         {"/v1/teams?team=nlp", "team"}}) {
    auto r = alice.Get(c.path);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.path << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], c.field) << c.path << r->body;
  }
}

}  // namespace
}  // namespace gantry::testing
