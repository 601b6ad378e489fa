// A standby controller (a second server on the same PostgreSQL store) answers on its own
// address before it leads. It must give nothing away and take nothing in: every path,
// with or without a token, gets 503 and the leader's URL only (/livez: 200, alive, with
// the leader's URL), writes change nothing (the
// leader's store stays as it was), and its /metrics, open without a token, holds the
// leadership gauges and nothing of any team.
#include <gtest/gtest.h>

#include "server/server_pair.h"

namespace gantry::testing {
namespace {

TEST(StandbyBoundaries, AStandbyAnswersEveryoneWithTheLeadersUrlAndNothingElse) {
  Pair p("standby-security");
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  ASSERT_EQ(SubmitTo(p.a.address(), "secret-experiment")->status, 201);
  p.b.Launch();
  const std::string standby = StandbyAddress(p.b);
  ASSERT_FALSE(standby.empty());
  httplib::Client anonymous(standby), alice(standby), root(standby);
  alice.set_bearer_token_auth(kAliceToken);
  root.set_bearer_token_auth(kRootToken);
  for (httplib::Client* c : {&anonymous, &alice, &root}) {
    for (const char* path : {"/v1/jobs", "/v1/jobs/1", "/v1/usage?by=job", "/v1/reports/monthly", "/v1/audit",
                             "/v1/nodes", "/", "/healthz"}) {
      auto r = c->Get(path);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 503) << path;
      EXPECT_EQ(r->body.find("secret-experiment"), std::string::npos) << path;
      EXPECT_EQ(r->body.find("vision"), std::string::npos) << path;
      nlohmann::json e = nlohmann::json::parse(r->body, nullptr, false);
      EXPECT_EQ(e["error"]["leader"], p.a.address()) << path << " " << r->body;
    }
    auto write = c->Post("/v1/jobs/1/cancel", "", "text/plain");
    ASSERT_TRUE(write);
    EXPECT_EQ(write->status, 503);
    auto agent = c->Post("/v1/agent/register", R"({"node_id": "node-a"})", "application/json");
    ASSERT_TRUE(agent);
    EXPECT_EQ(agent->status, 503);
  }
  // Alive and ready for an orchestrator's probes (the leader's URL, nothing else).
  for (const char* probe : {"/livez", "/readyz"}) {
    auto health = anonymous.Get(probe);
    ASSERT_TRUE(health) << probe;
    EXPECT_EQ(health->status, 200) << probe;
    EXPECT_EQ(Json(health), (nlohmann::json{{"status", "standby"}, {"leader", p.a.address()}})) << probe;
  }
  EXPECT_EQ(p.a.Client(nullptr).Get("/readyz")->status, 200);  // the leader is
  // Nothing the standby was sent reached the store.
  auto job = p.a.Client(kAliceToken).Get("/v1/jobs/1");
  ASSERT_TRUE(job);
  EXPECT_EQ(Json(job)["state"], "pending") << job->body;
  // Its metrics, open to anyone: the leadership gauges, and no job, team or cost.
  auto metrics = anonymous.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (size_t at = 0, end; at < metrics->body.size(); at = end + 1) {
    end = metrics->body.find('\n', at);
    if (end == std::string::npos) end = metrics->body.size();
    std::string line = metrics->body.substr(at, end - at);
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind("gantry_leader", 0), 0u) << line;
  }
}

}  // namespace
}  // namespace gantry::testing
