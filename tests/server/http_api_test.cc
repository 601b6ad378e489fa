// Integration: the real server on loopback, driven over HTTP and through the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using HttpApi = ServerTest;

TEST_F(HttpApi, HealthAndMetricsAreOpenButV1NeedsAValidToken) {
  auto anon = server_->Client(nullptr);
  EXPECT_EQ(anon.Get("/healthz")->status, 200);
  auto metrics = anon.Get("/metrics");
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("# TYPE gantry_submit_to_start_seconds histogram"), std::string::npos);
  EXPECT_NE(metrics->body.find("gantry_gpus{gpu_type=\"A100-80GB\"} 4"), std::string::npos);
  auto r = anon.Get("/v1/jobs");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Json(r)["error"]["field"], "Authorization");
  auto bad = server_->Client("not-a-token");
  EXPECT_EQ(bad.Post("/v1/jobs", "{gpus: 1}", "application/yaml")->status, 401);
  // The refused submit is in the audit log; only admins read it.
  EXPECT_EQ(server_->Client(kAliceToken).Get("/v1/audit")->status, 403);
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit"));
  ASSERT_FALSE(audit["audit"].empty());
  EXPECT_EQ(audit["audit"][0]["status"], 401);
  EXPECT_EQ(audit["audit"][0]["action"], "POST /v1/jobs");
}

TEST_F(HttpApi, SubmitJsonOrYamlThenQueueAndCancel) {
  auto c = server_->Client(kAliceToken);
  auto a = c.Post("/v1/jobs", R"({"gpus": 4, "gpu_types": ["A100-80GB"], "command": "sleep 60"})", "application/json");
  ASSERT_EQ(a->status, 201) << a->body;
  nlohmann::json first = Json(a);
  EXPECT_EQ(first["state"], "running");
  EXPECT_EQ(first["placement"][0]["node"], "a100-80gb-0");
  auto b = c.Post("/v1/jobs", "gpus: 2\ngpu_types: [A100-80GB]\nname: waits\nhold_gpus: 1d\n", "application/yaml");
  ASSERT_EQ(b->status, 201);
  std::string waiting = Json(b)["id"];
  nlohmann::json queue = Json(c.Get("/v1/queue"));
  ASSERT_EQ(queue["queue"].size(), 1u);
  EXPECT_EQ(queue["queue"][0]["id"], waiting);
  EXPECT_EQ(queue["queue"][0]["position"], 1);
  EXPECT_FALSE(queue["queue"][0]["reason"].get<std::string>().empty());
  nlohmann::json cluster = Json(c.Get("/v1/cluster"));
  EXPECT_EQ(cluster["by_type"]["A100-80GB"]["available"], 0);
  EXPECT_EQ(cluster["queued"], 1);
  EXPECT_EQ(c.Delete("/v1/jobs/" + first["id"].get<std::string>())->status, 200);
  // SIGTERM ends `sleep`; the freed GPUs go to the waiting job.
  EXPECT_EQ(WaitFor(first["id"], "cancelled"), "cancelled");
  EXPECT_EQ(WaitFor(waiting, "running"), "running");
}

TEST_F(HttpApi, BadInputIsRefusedNamingTheFieldAndChangesNothing) {
  auto c = server_->Client(kAliceToken);
  auto field = [&](const std::string& body) {
    auto r = c.Post("/v1/jobs", body, "application/json");
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    return Json(r)["error"].value("field", "");
  };
  EXPECT_EQ(field(R"({"gpus": 1,)"), "body");
  EXPECT_EQ(field(R"({"gpus": 1, "gpuz": 2})"), "gpuz");
  EXPECT_EQ(field(R"({"gpus": -1})"), "gpus");
  EXPECT_EQ(field(R"({"gpus": 100000000000})"), "gpus");
  EXPECT_EQ(field(R"({"gpus": 1, "gpu_types": ["Z100"]})"), "gpu_types");
  EXPECT_EQ(field(R"({"gpu_fraction": 1.5})"), "gpu_fraction");
  EXPECT_EQ(field(R"({"gpus": 9})"), "gpus");  // no node has 9 GPUs
  EXPECT_EQ(field(R"([1, 2])"), "job");
  auto huge = c.Post("/v1/jobs", std::string(2 << 20, ' '), "application/json");
  EXPECT_EQ(huge->status, 413);
  EXPECT_EQ(Json(huge)["error"]["field"], "body");
  auto param = c.Get("/v1/jobs?colour=red");
  EXPECT_EQ(param->status, 400);
  EXPECT_EQ(Json(param)["error"]["field"], "colour");
  EXPECT_EQ(Json(c.Get("/v1/jobs?limit=0"))["error"]["field"], "limit");
  EXPECT_EQ(c.Get("/v1/nope")->status, 404);
  EXPECT_TRUE(Json(c.Get("/v1/jobs"))["jobs"].empty());
}

TEST_F(HttpApi, TeamsAreIsolated) {
  auto alice = server_->Client(kAliceToken);
  auto bob = server_->Client(kBobToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "sleep 30"})", "application/json"))["id"];
  EXPECT_EQ(bob.Get("/v1/jobs/" + id)->status, 404);
  EXPECT_EQ(bob.Delete("/v1/jobs/" + id)->status, 404);
  EXPECT_EQ(bob.Get("/v1/jobs/" + id + "/logs")->status, 404);
  EXPECT_TRUE(Json(bob.Get("/v1/jobs"))["jobs"].empty());
  auto other_team = bob.Post("/v1/jobs", R"({"gpus": 1, "team": "vision"})", "application/json");
  EXPECT_EQ(other_team->status, 403);
  // A team admin may submit for a teammate; a user may not.
  EXPECT_EQ(server_->Client(kLeadToken)
                .Post("/v1/jobs", R"({"gpus": 1, "user": "alice", "hold_gpus": "1h"})", "application/json")
                ->status,
            201);
  EXPECT_EQ(bob.Post("/v1/jobs", R"({"gpus": 1, "user": "carl"})", "application/json")->status, 403);
  EXPECT_EQ(Json(server_->Client(kRootToken).Get("/v1/jobs"))["jobs"].size(), 2u);
  EXPECT_EQ(WaitFor(id, "running"), "running");
}

TEST_F(HttpApi, RetriedSubmitWithAnIdempotencyKeyMakesOneJob) {
  auto c = server_->Client(kAliceToken);
  httplib::Headers key = {{"Idempotency-Key", "retry-1"}};
  auto a = c.Post("/v1/jobs", key, R"({"gpus": 1, "hold_gpus": "1h"})", "application/json");
  auto b = c.Post("/v1/jobs", key, R"({"gpus": 1, "hold_gpus": "1h"})", "application/json");
  EXPECT_EQ(a->status, 201);
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(Json(a)["id"], Json(b)["id"]);
  EXPECT_EQ(c.Post("/v1/jobs", key, R"({"gpus": 2, "hold_gpus": "1h"})", "application/json")->status, 422);
  EXPECT_EQ(Json(c.Get("/v1/jobs"))["jobs"].size(), 1u);
}

TEST_F(HttpApi, OnlyAdminsDrainOneGpuOrANode) {
  EXPECT_EQ(server_->Client(kAliceToken).Post("/v1/nodes/t4-0/drain", "", "text/plain")->status, 403);
  auto root = server_->Client(kRootToken);
  EXPECT_EQ(root.Post("/v1/nodes/t4-0/drain?gpu=1", "", "text/plain")->status, 200);
  EXPECT_EQ(root.Post("/v1/nodes/t4-0/drain?gpu=7", "", "text/plain")->status, 400);
  nlohmann::json nodes = Json(root.Get("/v1/nodes"));
  EXPECT_TRUE(nodes["nodes"][1]["gpus"][1]["fenced"].get<bool>());
  auto two_t4 = root.Post("/v1/jobs", R"({"gpus": 2, "gpu_types": ["T4"], "hold_gpus": "1h"})", "application/json");
  EXPECT_EQ(Json(two_t4)["state"], "pending");  // one T4 is fenced
  EXPECT_EQ(root.Post("/v1/nodes/t4-0/undrain?gpu=1", "", "text/plain")->status, 200);
  EXPECT_EQ(WaitFor(Json(two_t4)["id"], "running", kRootToken), "running");
}

TEST_F(HttpApi, JobRunsForRealWithItsEnvironmentAndLogs) {
  int rc = 0;
  std::string out =
      Cli("submit -g 1 -t T4 --name hello -e GREETING=hi -- 'echo $GREETING job=$GANTRY_JOB_ID "
          "gpus=$CUDA_VISIBLE_DEVICES restart=$GANTRY_RESTART_COUNT; echo oops >&2'",
          kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("submitted job 1 (running) on t4-0[0]"), std::string::npos) << out;
  EXPECT_EQ(WaitFor("1", "succeeded"), "succeeded");
  EXPECT_EQ(Cli("logs 1"), "hi job=1 gpus=GPU-fake-t4-0-0 restart=0\n");
  EXPECT_EQ(Cli("logs 1 --stderr"), "oops\n");
  std::string jobs = Cli("jobs");
  EXPECT_NE(jobs.find("hello"), std::string::npos);
  EXPECT_NE(jobs.find("succeeded"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(Cli("job 1 -o json"));
  EXPECT_EQ(j["exit_code"], 0);
}

TEST_F(HttpApi, CliSubmitsAJobsFileAndShowsTheQueue) {
  std::string file = TempPath("jobs.txt");
  std::ofstream(file) << "priority,script,conda_env,arguments,allowed_gpus\n"
                      << "2,train.py,,--epochs 3,A100-80GB\n"
                      << "0,eval.sh,,,T4\n"
                      << "1,\"run, fast.sh\",,,4\n";
  int rc = 0;
  std::string out = Cli("submit --jobs-file " + file, kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json jobs = Json(server_->Client(kAliceToken).Get("/v1/jobs"));
  ASSERT_EQ(jobs["jobs"].size(), 3u);
  nlohmann::json first = Json(server_->Client(kAliceToken).Get("/v1/jobs/1"));
  EXPECT_EQ(first["priority"], "high");
  EXPECT_EQ(first["spec"]["command"], "python train.py --epochs 3");
  EXPECT_EQ(first["spec"]["gpu_types"][0], "A100-80GB");
  std::string bad = TempPath("bad.txt");
  std::ofstream(bad) << "1,x.sh,,\n";
  out = Cli("submit --jobs-file " + bad, kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("line 1"), std::string::npos) << out;
  std::string queue = Cli("queue");
  EXPECT_NE(queue.find("POS"), std::string::npos) << queue;
  EXPECT_EQ(Cli("drain t4-0", kAliceToken, &rc).find("error (403)") != std::string::npos, true);
  EXPECT_NE(Cli("drain t4-0:1", kRootToken, &rc).find("t4-0:1 drained"), std::string::npos);
}

// Everything after "--" is the command, even right after an option that takes several
// values (-t, -e), and even when the command has options of its own.
TEST_F(HttpApi, TheCliTakesEverythingAfterDashesAsTheCommand) {
  int rc = 0;
  std::string out = Cli("submit -o json -g 1 -t A100-80GB -- python3 train.py --lr 0.1", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json job = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(job["spec"]["command"], "python3 train.py --lr 0.1");
  EXPECT_EQ(job["spec"]["gpu_types"], nlohmann::json::array({"A100-80GB"}));
  // A bare --time-limit is minutes, as Slurm's -t; Slurm's clock forms are taken too.
  EXPECT_EQ(job["spec"]["time_limit_s"], 24 * 3600);
  out = Cli("submit -o json -g 1 --time-limit 30 --estimate 1-00:00 -- true", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  job = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(job["spec"]["time_limit_s"], 1800);
  EXPECT_EQ(job["spec"]["estimated_duration_s"], 24 * 3600);
  out = Cli("submit -o json -g 1 -e WANDB_MODE=offline -- jupyter lab --port 8888", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  job = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(job["spec"]["command"], "jupyter lab --port 8888");
  EXPECT_EQ(job["spec"]["env"]["WANDB_MODE"], "offline");
  // A command before "--" as well as after it is ambiguous: refused, nothing submitted.
  out = Cli("submit -g 1 echo -- hi", kAliceToken, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("command"), std::string::npos) << out;
  EXPECT_EQ(Json(server_->Client(kAliceToken).Get("/v1/jobs"))["jobs"].size(), 3u);
}

// A team_quotas.yaml written after the server started applies without a restart.
TEST_F(HttpApi, AQuotaFileWrittenLaterApplies) {
  ASSERT_FALSE(std::filesystem::exists(server_->dir() + "/config/team_quotas.yaml"));
  auto c = server_->Client(kAliceToken);
  auto verdict = [&] {
    return Json(c.Post("/v1/jobs?dry_run=true", R"({"gpus": 2, "gpu_types": ["T4"], "command": "true"})",
                       "application/json"))["jobs"][0];
  };
  ASSERT_TRUE(verdict()["ok"].get<bool>());
  std::ofstream(server_->dir() + "/config/team_quotas.yaml") << "teams:\n  vision: {max_gpus: 1}\n";
  nlohmann::json v;
  for (int i = 0; i < 100; ++i) {
    v = verdict();
    if (!v["ok"].get<bool>()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(v["ok"].get<bool>()) << v.dump();
  EXPECT_EQ(v["error"]["field"], "gpus") << v.dump();
}

// A batch is taken whole or not at all; a retry with its key gets the same jobs back.
TEST_F(HttpApi, ABatchIsAllOrNothingAndReplaysByKey) {
  auto c = server_->Client(kAliceToken);
  auto bad =
      c.Post("/v1/jobs/batch",
             R"({"jobs": [{"gpus": 1, "command": "true"}, {"gpus": 1, "gpu_types": ["Z100"], "command": "true"}]})",
             "application/json");
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(Json(bad)["error"]["field"], "jobs[1].gpu_types");
  EXPECT_TRUE(Json(c.Get("/v1/jobs"))["jobs"].empty());
  EXPECT_EQ(Json(c.Post("/v1/jobs/batch", "jobs: 3", "application/yaml"))["error"]["field"], "jobs");
  std::string two = R"({"jobs": [{"gpus": 1, "command": "true"}, {"gpus": 2, "command": "true", "name": "b"}]})";
  auto made = c.Post("/v1/jobs/batch", httplib::Headers{{"Idempotency-Key", "k1"}}, two, "application/json");
  ASSERT_EQ(made->status, 201) << made->body;
  ASSERT_EQ(Json(made)["jobs"].size(), 2u);
  EXPECT_EQ(Json(made)["jobs"][1]["name"], "b");
  auto again = c.Post("/v1/jobs/batch", httplib::Headers{{"Idempotency-Key", "k1"}}, two, "application/json");
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(Json(again)["jobs"][1]["id"], Json(made)["jobs"][1]["id"]);
  EXPECT_EQ(Json(c.Get("/v1/jobs"))["jobs"].size(), 2u);
}

// gantry hold / queue / update / release, as a Slurm user runs scontrol hold, squeue,
// scontrol update and scontrol release.
TEST_F(HttpApi, TheCliHoldsChangesAndReleasesAPendingJob) {
  int rc = 0;
  Cli("submit -g 4 -t A100-80GB -- sleep 60", kAliceToken, &rc);
  ASSERT_EQ(rc, 0);
  std::string out = Cli("submit -o json -g 4 -t A100-80GB --name waits -- sleep 60", kAliceToken, &rc);
  std::string id = nlohmann::json::parse(out.substr(out.find('{')))["id"];
  out = Cli("hold " + id, kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("job " + id + ": pending (held: user)"), std::string::npos) << out;
  out = Cli("queue", kAliceToken, &rc);
  EXPECT_NE(out.find("(no job waits)"), std::string::npos) << out;
  EXPECT_NE(out.find("held (gantry release " + id + ")"), std::string::npos) << out;
  out = Cli("update " + id + " --time-limit 3h -p high --name renamed", kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  nlohmann::json job = Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id));
  EXPECT_EQ(job["name"], "renamed");
  EXPECT_EQ(job["priority"], "high");
  EXPECT_EQ(job["spec"]["time_limit_s"], 10800);
  // A refused change names the field and exits non-zero.
  out = Cli("update " + id + " -t Z100", kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("gpu_types"), std::string::npos) << out;
  out = Cli("release " + id, kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  out = Cli("queue --explain " + id, kAliceToken, &rc);
  EXPECT_NE(out.find("position 1"), std::string::npos) << out;
}

TEST_F(HttpApi, AnInjectedXid79FencesTheGpuAndRequeuesItsJob) {
  auto alice = server_->Client(kAliceToken);
  auto root = server_->Client(kRootToken);
  nlohmann::json job =
      Json(alice.Post("/v1/jobs", R"({"gpus": 1, "gpu_types": ["T4"], "command": "sleep 60"})", "application/json"));
  ASSERT_EQ(job["placement"][0]["node"], "t4-0");
  int gpu = job["placement"][0]["gpus"][0]["index"];
  std::string id = job["id"];
  EXPECT_EQ(alice.Post("/v1/nodes/t4-0/gpus/0/fault", R"({"xid": 79})", "application/json")->status, 403);
  auto fault = root.Post(fmt::format("/v1/nodes/t4-0/gpus/{}/fault", gpu), R"({"xid": 79})", "application/json");
  ASSERT_EQ(fault->status, 200) << fault->body;
  // SIGTERM ends `sleep`; the job requeues (a fault) and starts again on another T4.
  nlohmann::json again;
  for (int i = 0; i < 300; ++i) {
    again = Json(alice.Get("/v1/jobs/" + id));
    if (again["runs"] == 2 && again["state"] == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(again["runs"], 2) << again.dump();
  EXPECT_NE(again["placement"][0]["gpus"][0]["index"], gpu);
  nlohmann::json gpus = Json(root.Get("/v1/nodes/t4-0/gpus"));
  EXPECT_FALSE(gpus["gpus"][gpu]["healthy"].get<bool>());
  nlohmann::json history = Json(root.Get("/v1/nodes/t4-0/events"));
  ASSERT_FALSE(history["events"].empty());
  EXPECT_EQ(history["events"][0]["kind"], "gpu_unhealthy");
  EXPECT_NE(history["events"][0]["detail"]["reason"].get<std::string>().find("XID 79"), std::string::npos);
  std::string metrics = server_->Client(nullptr).Get("/metrics")->body;
  EXPECT_NE(metrics.find(fmt::format("gantry_gpu_healthy{{gpu=\"{}\",UUID=\"GPU-fake-t4-0-{}\"", gpu, gpu)),
            std::string::npos);
  // An admin's undrain returns it to service.
  ASSERT_EQ(root.Post(fmt::format("/v1/nodes/t4-0/undrain?gpu={}", gpu), "", "text/plain")->status, 200);
  EXPECT_TRUE(Json(root.Get("/v1/nodes/t4-0/gpus"))["gpus"][gpu]["healthy"].get<bool>());
}

TEST_F(HttpApi, GpuTelemetryIsAttributedToTheJob) {
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "gpu_types": ["A100-80GB"], "command": "sleep 30"})",
                                   "application/json"))["id"];
  // Readings come every telemetry_interval (5 s by default).
  nlohmann::json gpu;
  for (int i = 0; i < 400; ++i) {
    nlohmann::json gpus = Json(alice.Get("/v1/nodes/a100-80gb-0/gpus"));
    gpu = gpus["gpus"][0];
    if (gpu.contains("telemetry") && !gpu["telemetry"]["processes"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(gpu.contains("telemetry")) << gpu.dump();
  EXPECT_GT(gpu["telemetry"]["utilization_pct"].get<double>(), 50);
  ASSERT_FALSE(gpu["telemetry"]["processes"].empty()) << gpu.dump();
  EXPECT_EQ(gpu["telemetry"]["processes"][0]["job"], id);
  std::string metrics = server_->Client(nullptr).Get("/metrics")->body;
  EXPECT_NE(metrics.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-fake-a100-80gb-0-0\",modelName=\"A100-80GB\","
                         "Hostname=\"a100-80gb-0\",job=\"" +
                         id + "\",team=\"vision\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
