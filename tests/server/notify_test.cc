// Job notifications: a job's start, end, failure and preemption reach its webhook (JSON or
// Slack's {"text"}), its team's default webhook, and its mail address through sendmail;
// jobs that ask for nothing send nothing. A job must name a command or a GPU hold.
#include <gtest/gtest.h>

#include <fstream>

#include "controller_harness.h"
#include "webhook_sink.h"

namespace gantry::testing {
namespace {

std::function<void(ControllerOptions&)> PublicUrl() {
  return [](ControllerOptions& o) { o.public_url = "https://gantry.example.org"; };
}

TEST(JobNotifications, StartAndFailureReachTheJobsWebhook) {
  WebhookSink sink;
  Harness h("", 3600 * 1000, PublicUrl());
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer job = h.Submit(
      "{gpus: 1, name: train, command: 'sleep 100', notify: 'start,fail', webhook: '" + sink.url() + "'}", kAlice);
  ASSERT_EQ(job.status, 201) << job.body.dump();
  std::string id = job.body["id"];
  ASSERT_TRUE(WaitFor([&] { return sink.bodies().size() == 1; }));
  nlohmann::json start = sink.bodies()[0];
  EXPECT_EQ(start["kind"], "job_start");
  EXPECT_EQ(start["job"]["id"], id);
  EXPECT_EQ(start["job"]["state"], "running");
  EXPECT_EQ(start["link"], "https://gantry.example.org/#/jobs/" + id);  // the dashboard's page
  EXPECT_FALSE(start["job"]["spec"].contains("webhook"));               // the receiver is not told its own URL
  h.now += kHourMs;
  ExitRun(h, id, 3);
  ASSERT_TRUE(WaitFor([&] { return sink.bodies().size() == 2; }));
  nlohmann::json failed = sink.bodies()[1];
  EXPECT_EQ(failed["event"], "fail");
  EXPECT_EQ(failed["job"]["state"], "failed");
  EXPECT_EQ(failed["job"]["exit_code"], 3);
  EXPECT_NEAR(failed["job"]["cost"].get<double>(), 3.43, 0.5) << failed.dump();  // an hour of one A100
  EXPECT_EQ(failed["message"], "job " + id + " (train) failed: exit code 3");
}

TEST(JobNotifications, SlackPayloadOnTheEndOnly) {
  WebhookSink sink;
  Harness h("", 3600 * 1000, PublicUrl());
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  // A webhook without events hears of the end.
  std::string id =
      h.Submit("{gpus: 1, command: 'true', notify_format: slack, webhook: '" + sink.url() + "'}", kAlice).body["id"];
  h.controller->Sync();
  ExitRun(h, id, 0);
  ASSERT_TRUE(WaitFor([&] { return sink.bodies().size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(sink.bodies().size(), 1u);
  EXPECT_EQ(sink.bodies()[0], nlohmann::json({{"text", fmt::format("job {} succeeded <https://gantry.example.org/#/"
                                                                   "jobs/{}|details>",
                                                                   id, id)}}));
}

TEST(JobNotifications, PreemptionIsTold) {
  WebhookSink sink;
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string victim =
      h.Submit("{gpus: 4, priority: low, command: 'sleep 1000', notify: preempt, webhook: '" + sink.url() + "'}",
               kAlice)
          .body["id"];
  h.now += 11 * kMinuteMs;  // past preemption.min_runtime
  h.Submit("{gpus: 4, priority: critical, command: 'true'}", kBob);
  h.controller->Sync();
  h.controller->RunExited(ExitReport(victim, 1, "n1", 143, ""));
  h.controller->Sync();
  ASSERT_TRUE(WaitFor([&] { return sink.bodies().size() == 1; }));
  EXPECT_EQ(sink.bodies()[0]["kind"], "job_preempt");
  EXPECT_EQ(sink.bodies()[0]["job"]["state"], "pending");
  EXPECT_EQ(sink.bodies()[0]["job"]["evictions"], 1);
}

TEST(JobNotifications, TheTeamsDefaultsApplyToJobsThatNameNone) {
  WebhookSink sink;
  Harness h("", 3600 * 1000, [&](ControllerOptions& o) {
    auto users = std::make_shared<UserDirectory>(*HarnessUsers());
    TeamPolicy vision = users->Team("vision");
    vision.notify_events = {"fail"};
    vision.notify_webhook = sink.url();
    users->SetTeam("vision", vision);
    o.users = users;
  });
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string ok = h.Submit("{gpus: 1, command: 'true'}", kAlice).body["id"];
  std::string bad = h.Submit("{gpus: 1, command: 'false'}", kAlice).body["id"];
  std::string other = h.Submit("{gpus: 1, command: 'false'}", kBob).body["id"];  // nlp: no defaults
  h.controller->Sync();
  ExitRun(h, ok, 0);
  ExitRun(h, other, 1);
  ExitRun(h, bad, 1);
  ASSERT_TRUE(WaitFor([&] { return sink.bodies().size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(sink.bodies().size(), 1u);
  EXPECT_EQ(sink.bodies()[0]["job"]["id"], bad);
}

// The detail of job `id`'s last event of `kind` (alice's), once there is one; null if none
// comes.
nlohmann::json EventDetail(Harness& h, const std::string& id, const std::string& kind) {
  nlohmann::json detail;
  WaitFor([&] {
    h.controller->Sync();
    auto events = h.controller->Events(kAlice, id);
    for (const auto& e : events ? (*events)["events"] : nlohmann::json::array()) {
      if (e["kind"] == kind) detail = e["detail"];
    }
    return !detail.is_null();
  });
  return detail;
}

TEST(JobNotifications, MailGoesThroughSendmail) {
  std::string dir = TempPath("mail");
  std::filesystem::create_directories(dir);
  std::string sendmail = dir + "/sendmail";
  std::ofstream(sendmail) << "#!/bin/sh\n[ \"$1 $2\" = '-t -oi' ] || exit 64\ncat > " << dir << "/message\n";
  std::filesystem::permissions(sendmail, std::filesystem::perms::owner_all);
  Harness h("", 3600 * 1000, [&](ControllerOptions& o) { o.sendmail = sendmail; });
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer job = h.Submit("{gpus: 1, name: eval, command: 'true', mail_user: alice@example.org}", kAlice);
  ASSERT_EQ(job.status, 201) << job.body.dump();
  h.controller->Sync();
  ExitRun(h, job.body["id"], 0);
  std::string text;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(dir + "/message");
    text.assign(std::istreambuf_iterator<char>(in), {});
    return text.find("cost:") != std::string::npos;
  }));
  EXPECT_EQ(text.rfind("To: alice@example.org\nSubject: [gantry] job " + job.body["id"].get<std::string>() +
                           " (eval) succeeded\n",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("exit code: 0"), std::string::npos) << text;
  // The delivery is on the job's events.
  const std::string id = job.body["id"];
  nlohmann::json notified = EventDetail(h, id, "notified");
  ASSERT_FALSE(notified.is_null());
  EXPECT_EQ(notified["via"], "mail");
  EXPECT_EQ(notified["to"], "alice@example.org");
  EXPECT_EQ(notified["event"], "end");
}

TEST(JobNotifications, AMailThatCannotBeSentIsOnTheJobsEvents) {
  std::string dir = TempPath("mail-fails");
  std::filesystem::create_directories(dir);
  std::string sendmail = dir + "/sendmail";
  std::ofstream(sendmail) << "#!/bin/sh\necho 'relay refused' >&2\nexit 75\n";
  std::filesystem::permissions(sendmail, std::filesystem::perms::owner_all);
  Harness h("", 3600 * 1000, [&](ControllerOptions& o) { o.sendmail = sendmail; });
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer job = h.Submit("{gpus: 1, command: 'true', mail_user: alice@example.org, notify: [fail, end]}", kAlice);
  ASSERT_EQ(job.status, 201) << job.body.dump();
  h.controller->Sync();
  const std::string id = job.body["id"];
  ExitRun(h, id, 0);
  nlohmann::json failed = EventDetail(h, id, "notify_failed");
  ASSERT_FALSE(failed.is_null());
  EXPECT_EQ(failed["via"], "mail");
  EXPECT_NE(failed["error"].get<std::string>().find("did not take it (3 tries): it exited with status 75"),
            std::string::npos)
      << failed.dump();
}

TEST(JobNotifications, BadSettingsAreRefusedNamingTheField) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  auto field = [&](const std::string& extra) {
    auto spec = ParseJobSpecText("{gpus: 1, command: 'true', " + extra + "}");
    if (!spec) return spec.status().field();
    return Api(h.controller->Submit(kAlice, *spec, "")).body["error"].value("field", "");
  };
  EXPECT_EQ(field("notify: 'end,lunch'"), "notify");
  EXPECT_EQ(field("notify: 'end,'"), "notify");
  EXPECT_EQ(field("webhook: 'ftp://127.0.0.1/x'"), "webhook");
  EXPECT_EQ(field("webhook: 'http://127.0.0.1/$(reboot) x'"), "webhook");
  EXPECT_EQ(field("notify_format: teams"), "notify_format");
  EXPECT_EQ(field("notify: [end]"), "notify") << "events with no one to tell";
  EXPECT_EQ(field("mail_user: 'alice; rm -rf /'"), "mail_user");
  EXPECT_EQ(field("mail_user: 'a@b@c'"), "mail_user");
  EXPECT_TRUE(Api(h.controller->ListJobs(kAdmin, {})).body["jobs"].empty());
}

TEST(JobCommand, AJobRunsACommandOrHoldsGpusForAStatedTime) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer bare = h.Submit("{gpus: 1}", kAlice);
  EXPECT_EQ(bare.status, 400);
  EXPECT_EQ(bare.body["error"]["field"], "command");
  EXPECT_NE(bare.body["error"]["message"].get<std::string>().find("hold_gpus"), std::string::npos);
  auto both = ParseJobSpecText("{gpus: 1, hold_gpus: 2h, command: 'sleep 1'}");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().field(), "hold_gpus");
  ApiAnswer hold = h.Submit("{gpus: 1, hold_gpus: 2h}", kAlice);
  ASSERT_EQ(hold.status, 201) << hold.body.dump();
  EXPECT_EQ(hold.body["state"], "running");
  EXPECT_EQ(hold.body["spec"]["hold_gpus_s"], 7200);
  EXPECT_EQ(hold.body["spec"]["estimated_duration_s"], 7200);  // what backfill plans with
  EXPECT_EQ(hold.body["spec"]["time_limit_s"], 86400);         // the default limit stays the backstop
  auto too_long = ParseJobSpecText("{gpus: 1, hold_gpus: 2h, time_limit: 1h}");
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().field(), "hold_gpus");
}

}  // namespace
}  // namespace gantry::testing
