// Role boundaries of job notifications, tried against the real server over HTTP: a job's
// webhook goes only to a host its team is allowed (else the server would POST into the
// site's own network for any user), an admin may name any; a job's webhook URL and mail
// address are not shown in job lists, and never to another team.
#include <gtest/gtest.h>

#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

class NotifyBoundaries : public ServerTest {
  std::string Teams() const override {
    return "teams:\n"
           "  vision: {unix_account: nobody, webhook_hosts: [hooks.slack.com, '*.example.org']}\n"
           "  nlp: {unix_account: nobody}\n"
           "  ops: {allow_root: true}\n";
  }
};

TEST_F(NotifyBoundaries, AJobWebhookGoesOnlyToAHostTheTeamMayUse) {
  auto alice = server_->Client(kAliceToken);
  auto post = [&](httplib::Client& c, const std::string& url) {
    return c.Post("/v1/jobs", R"({"gpus": 1, "command": "true", "webhook": ")" + url + R"("})", "application/json");
  };
  for (const char* url :
       {"http://127.0.0.1:8080/v1/nodes/x/drain", "http://169.254.169.254/latest/meta-data",
        "https://example.org.evil.com/x", "https://hooks.slack.com@10.0.0.1/x", "https://10.0.0.1@hooks.slack.com/x"}) {
    auto r = post(alice, url);
    EXPECT_TRUE(r->status == 403 || r->status == 400) << url << ": " << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], "webhook") << url;
  }
  EXPECT_EQ(post(alice, "https://hooks.slack.com/services/T0/B0/x")->status, 201);
  EXPECT_EQ(post(alice, "https://ci.example.org/hook")->status, 201);
  // A team with no webhook_hosts sends no job webhooks at all.
  auto bob = server_->Client(kBobToken);
  auto r = post(bob, "https://hooks.slack.com/services/T0/B0/x");
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(Json(r)["error"]["message"].get<std::string>().find("webhook_hosts"), std::string::npos);
  // Admins choose where their own jobs report.
  auto root = server_->Client(kRootToken);
  EXPECT_EQ(post(root, "http://127.0.0.1:9/hook")->status, 201);
  // Nothing refused was made: alice's two jobs and root's one.
  EXPECT_EQ(Json(root.Get("/v1/jobs"))["jobs"].size(), 3u);
}

TEST_F(NotifyBoundaries, WebhooksAndMailAddressesStayWithTheJobsTeam) {
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs",
                                   R"({"gpus": 1, "command": "sleep 30", "webhook": "https://hooks.slack.com/s/secret",
                                       "mail_user": "alice@example.org"})",
                                   "application/json"))["id"];
  nlohmann::json listed = Json(alice.Get("/v1/jobs"))["jobs"][0]["spec"];
  EXPECT_FALSE(listed.contains("webhook")) << listed.dump();
  EXPECT_FALSE(listed.contains("mail_user")) << listed.dump();
  EXPECT_EQ(Json(alice.Get("/v1/jobs/" + id))["spec"]["webhook"], "https://hooks.slack.com/s/secret");
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(bob.Get("/v1/jobs/" + id)->status, 404);
  EXPECT_EQ(bob.Get("/v1/jobs")->body.find("secret"), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
