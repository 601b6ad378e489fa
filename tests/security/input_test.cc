// Bad input is refused naming the field; priority classes need the team's permission;
// /metrics with a token is an admin's; refusals are audited; CSV cells are never
// formulas; job logs are capped keeping their newest part.
#include <gtest/gtest.h>

#include <filesystem>

#include "billing/report.h"
#include "security/security_util.h"

namespace gantry::testing {
namespace {

class Input : public ::testing::Test {
 protected:
  void SetUp() override { Start({}, kTestTeams); }
  void Start(const std::vector<std::string>& args, const std::string& teams) {
    std::string dir = TempPath("srv");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir);
    server_->WriteUsers(teams);
    server_->AddArgs(args);
    server_->Start();
  }
  std::unique_ptr<ServerProcess> server_;
};

// Before: each of these was accepted (201), cut silently, or answered 500.
TEST_F(Input, MalformedJobsAreRefusedNamingTheField) {
  struct Case {
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {R"({"gpu_fraction": 0, "command": "x"})", "gpu_fraction"},
      {R"({"gpus": 1, "command": ""})", "command"},
      {R"({"gpus": 1, "command": "   "})", "command"},
      {R"({"gpus": 1, "memory_gb": -1, "command": "x"})", "memory_gb"},
      {R"({"gpus": 1, "gpu_memory_gb": 1e300, "command": "x"})", "gpu_memory_gb"},
      {"{\"gpus\": 1, \"name\": \"a\\u001b[31mred\", \"command\": \"x\"}", "name"},
      {"{\"gpus\": 1, \"name\": \"two\\nlines\", \"command\": \"x\"}", "name"},
      {"{\"gpus\": 1, \"working_dir\": \"/tmp\\u0000/etc\", \"command\": \"x\"}", "working_dir"},
      {"{\"gpus\": 1, \"env\": {\"A\": \"b\\u0000c\"}, \"command\": \"x\"}", "env.A"},
      {R"({"gpus": 1, "gpus": 2, "command": "x"})", "gpus"},
      {R"({"gpus": 1, "preemptible": "yes", "command": "x"})", "preemptible"},
      {R"({"gpus": "2", "command": "x"})", "gpus"},
      {R"j({"gpus": 1, "project": "=HYPERLINK(\"http://x\")", "command": "x"})j", "project"},
      {R"({"gpus": 1, "project": "a; rm -rf /", "command": "x"})", "project"},
      {"gpus: 1\ncommand: x\n---\ngpus: 8\ncommand: y\n", "body"},
      {",{", "job"},  // yaml-cpp's LoadAll looped forever on it, growing to gigabytes (found by fuzz_job_spec)
      {"{gpus: 1, !x}", "body"},
  };
  auto alice = server_->Client(kAliceToken);
  for (const Case& c : cases) {
    auto r = alice.Post("/v1/jobs", c.body, "application/json");
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, 400) << c.body << " -> " << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], c.field) << c.body << " -> " << r->body;
  }
  EXPECT_EQ(Json(alice.Get("/v1/jobs"))["jobs"].size(), 0u);
  // A 20-digit GPU index in the admin fault call: 400, not 500.
  auto r = server_->Client(kRootToken)
               .Post("/v1/nodes/a100-80gb-0/gpus/99999999999999999999/fault", "{}", "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "gpu");
}

// Before: any user submitted critical, non-preemptible work and preempted other teams.
TEST_F(Input, PriorityClassesNeedTheTeamsPermission) {
  Start({}, "teams:\n  vision: {priorities: [high, medium, low]}\n");
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Post("/v1/jobs", R"({"gpus": 1, "priority": "critical", "command": "x"})", "application/json");
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "priority");
  r = alice.Post("/v1/jobs", R"({"gpus": 1, "priority": "high", "preemptible": false, "command": "x"})",
                 "application/json");
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "preemptible");
  EXPECT_EQ(alice.Post("/v1/jobs", R"({"gpus": 1, "priority": "high", "command": "x"})", "application/json")->status,
            201);
  // A team without a policy gets the default class and those below it.
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(bob.Post("/v1/jobs", R"({"gpus": 1, "priority": "high", "command": "x"})", "application/json")->status,
            403);
  EXPECT_EQ(bob.Post("/v1/jobs", R"({"gpus": 1, "priority": "low", "command": "x"})", "application/json")->status, 201);
}

// Before: with --metrics-need-token a user of one team read every team's costs.
TEST_F(Input, MetricsWithATokenAreForAdminsOnly) {
  Start({"--metrics-need-token"}, kTestTeams);
  EXPECT_EQ(server_->Client(nullptr).Get("/metrics")->status, 401);
  EXPECT_EQ(server_->Client(kAliceToken).Get("/metrics")->status, 403);
  EXPECT_EQ(server_->Client(kLeadToken).Get("/metrics")->status, 403);
  EXPECT_EQ(server_->Client(kRootToken).Get("/metrics")->status, 200);
}

// Before: refused cross-role calls, oversized idempotency keys and agent registrations
// left no trace in the audit log.
TEST_F(Input, RefusalsAndAgentCallsAreAudited) {
  Start({}, kTestTeams);
  EXPECT_EQ(server_->Client(kAgentToken).Get("/v1/jobs")->status, 403);
  httplib::Headers key = {{"Idempotency-Key", std::string(300, 'k')}};
  EXPECT_EQ(server_->Client(kAliceToken).Post("/v1/jobs", key, R"({"gpus": 1})", "application/json")->status, 400);
  nlohmann::json reg = {{"node_id", "node-a"}, {"inventory", {{"gpus", nlohmann::json::array()}}}};
  server_->Client(kAgentToken).Post("/v1/agent/register", reg.dump(), "application/json");
  std::string audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=20")).dump();
  EXPECT_NE(audit.find("\"action\":\"GET /v1/jobs\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("Idempotency-Key longer than 255"), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"action\":\"POST /v1/agent/register\""), std::string::npos) << audit;
}

// Before: a project named =HYPERLINK(...) went into the CSV bill as a live formula.
TEST(CsvBill, NoCellIsReadAsAFormula) {
  nlohmann::json line = {{"team", "=HYPERLINK(\"http://x\",\"y\")"},
                         {"project", "+1"},
                         {"user", "@u"},
                         {"gpu_type", "-2"},
                         {"gpu_hours", 1.0},
                         {"cost", 2.0}};
  nlohmann::json none = nlohmann::json::array();
  nlohmann::json report = {{"totals", nlohmann::json::object()},
                           {"teams", none},
                           {"projects", {line}},
                           {"gpu_types", none},
                           {"top_jobs", none},
                           {"idle_jobs", none},
                           {"daily", none}};
  std::string csv = ReportCsv(report);
  EXPECT_EQ(csv.find(",=HYPERLINK"), std::string::npos) << csv;
  EXPECT_EQ(csv.find(",\"=HYPERLINK"), std::string::npos) << csv;
  EXPECT_NE(csv.find("'=HYPERLINK"), std::string::npos) << csv;
  for (const char* cell : {",'+1", ",'@u", ",'-2"}) EXPECT_NE(csv.find(cell), std::string::npos) << cell << "\n" << csv;
}

// Before: logs had no cap (200 MB stored in 2 s).
TEST_F(Input, JobLogsAreCappedKeepingTheNewestOutput) {
  Start({"--max-log-mb", "1"}, kTestTeams);
  // 3 MiB of numbered lines, then a last line; each line 64 bytes.
  auto alice = server_->Client(kAliceToken);
  std::string id =
      Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "seq -f '%063g' 1 49152; sleep 1.5; echo the-end"})",
                      "application/json"))["id"];
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, id, "state"); }, "succeeded"), "succeeded");
  std::string log = server_->data_dir() + "/agent/jobs/" + id + "/run-1/rank-0.stdout.log";
  EXPECT_LE(std::filesystem::file_size(log), 1u << 20);
  auto r = alice.Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(r);
  std::string tail = r->body;
  EXPECT_GE(tail.size(), 64u);
  EXPECT_EQ(tail.substr(tail.size() - 8), "the-end\n");
  // Offsets stay those of everything the job wrote.
  EXPECT_EQ(std::stoll(r->get_header_value("X-Log-Offset")), 49152 * 64 + 8);
}

}  // namespace
}  // namespace gantry::testing
