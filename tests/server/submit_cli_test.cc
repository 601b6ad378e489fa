// The CLI's job flags and time display against the real server: every job field has a
// flag (Slurm's --mail-type included), a job needs a command or --hold-gpus, a submit
// without a time gets a hint, and `gantry jobs` shows ages in local time or UTC and
// filters by --since/--until.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using SubmitCli = ServerTest;

TEST_F(SubmitCli, EveryJobFieldHasAFlag) {
  int rc = 0;
  std::string out =
      Cli("submit --dry-run -o json -g 1 -t T4 -t A100-80GB --prefer-listed-order --node-selector zone=a "
          "--prefer-label rack=r1:5 --toleration spot --retries 2 --max-fault-retries 1 --mail-type BEGIN,FAIL "
          "--mail-user alice@example.org --estimate 90 -- true",
          kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json verdict = JsonIn(out)["jobs"][0];
  EXPECT_NE(verdict.value("reason", "").find("labels do not match"), std::string::npos) << out;  // no zone=a node
  nlohmann::json spec = verdict["spec"];
  EXPECT_EQ(spec["gpu_types"], nlohmann::json({"T4", "A100-80GB"})) << spec.dump();
  EXPECT_EQ(spec["prefer_listed_order"], true);
  EXPECT_EQ(spec["node_selector"], nlohmann::json({{"zone", "a"}}));
  EXPECT_EQ(spec["preferred_labels"][0], nlohmann::json({{"key", "rack"}, {"value", "r1"}, {"weight", 5}}));
  EXPECT_EQ(spec["tolerations"], nlohmann::json({"spot"}));
  EXPECT_EQ(spec["retries_on_failure"], 2);
  EXPECT_EQ(spec["max_retries"], 1);
  EXPECT_EQ(spec["notify"], nlohmann::json({"start", "fail"}));
  EXPECT_EQ(spec["mail_user"], "alice@example.org");
  EXPECT_EQ(spec["estimated_duration_s"], 5400);  // a bare number is minutes
  out = Cli("submit -g 1 --mail-type LUNCH -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--mail-type: unknown type 'lunch'"), std::string::npos) << out;
  out = Cli("submit -g 1 --prefer-label rack=r1:heavy -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--prefer-label"), std::string::npos) << out;
}

TEST_F(SubmitCli, AJobNeedsACommandOrAGpuHold) {
  int rc = 0;
  std::string out = Cli("submit -g 1 -t T4", kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("command: is missing"), std::string::npos) << out;
  out = Cli("submit -g 1 -t T4 --hold-gpus 30m", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(running)"), std::string::npos) << out;
  EXPECT_EQ(out.find("hint: no --estimate"), std::string::npos) << out;          // a hold has its time
  EXPECT_NE(out.find("holds its GPUs: gantry exec"), std::string::npos) << out;  // and is told how to use it
  nlohmann::json job = JsonIn(Cli("job -o json " + JsonIn(Cli("jobs -o json"))["jobs"][0]["id"].get<std::string>()));
  EXPECT_EQ(job["spec"]["estimated_duration_s"], 1800);
  // The node ends a hold when its time is up: the job succeeds, its GPUs are free.
  std::string brief = JsonIn(Cli("submit -o json -g 1 -t T4 --hold-gpus 1s"))["id"];
  EXPECT_EQ(WaitFor(brief, "succeeded"), "succeeded");
  out = Cli("submit -g 1 -t T4 --hold-gpus 30m -- sleep 1", kAliceToken, &rc);
  EXPECT_NE(out.find("hold_gpus"), std::string::npos) << out;
  // Without an estimate or a limit, a hint about backfill (on stderr; stdout stays the id).
  out = Cli("submit -g 1 -t T4 -- true", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("hint: no --estimate or --time-limit"), std::string::npos) << out;
}

TEST_F(SubmitCli, JobsShowAgesAndFilterByTime) {
  int rc = 0;
  Cli("submit -g 1 -t T4 --estimate 1m -- sleep 30", kAliceToken, &rc);
  ASSERT_EQ(rc, 0);
  std::string out = Cli("jobs", kAliceToken, &rc);
  EXPECT_NE(out.find("SUBMITTED"), std::string::npos) << out;
  EXPECT_NE(out.find("ELAPSED"), std::string::npos) << out;
  EXPECT_TRUE(out.find("s ago") != std::string::npos || out.find("now") != std::string::npos) << out;
  std::string id = JsonIn(Cli("jobs -o json"))["jobs"][0]["id"];
  EXPECT_NE(Cli("job --utc " + id).find(" UTC ("), std::string::npos);
  EXPECT_EQ(JsonIn(Cli("jobs -o json --since 1h"))["jobs"].size(), 1u);
  EXPECT_EQ(JsonIn(Cli("jobs -o json --until 2000-01-01"))["jobs"].size(), 0u);
  EXPECT_EQ(JsonIn(Cli("jobs -o json --since now --until '2099-01-01 00:00'"))["jobs"].size(), 1u);  // still running
  out = Cli("jobs --since yesterday-ish", kAliceToken, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--since"), std::string::npos) << out;
  auto raw = server_->Client(kAliceToken).Get("/v1/jobs?since=tomorrow");
  EXPECT_EQ(raw->status, 400);
  EXPECT_EQ(Json(raw)["error"]["field"], "since");
}

}  // namespace
}  // namespace gantry::testing
