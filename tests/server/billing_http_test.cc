// Integration: accounting through the real server on loopback, over HTTP and the CLI:
// usage and the monthly bill of jobs that ran for real, the report's reconciliation with
// the job event history, a job stopped at its cost limit, and refused bad parameters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using BillingHttp = ServerTest;

TEST_F(BillingHttp, UsageAndTheMonthlyBillOfJobsThatRan) {
  auto alice = server_->Client(kAliceToken);
  auto a = alice.Post("/v1/jobs", "{gpus: 2, gpu_types: [A100-80GB], project: det, command: 'sleep 0.5'}",
                      "application/yaml");
  ASSERT_EQ(a->status, 201) << a->body;
  std::string id = Json(a)["id"];
  auto b = server_->Client(kBobToken).Post("/v1/jobs", "{gpus: 1, gpu_types: [T4], command: 'sleep 0.2'}",
                                           "application/yaml");
  ASSERT_EQ(b->status, 201);
  ASSERT_EQ(WaitFor(id, "succeeded"), "succeeded");
  ASSERT_EQ(WaitFor(Json(b)["id"], "succeeded", kBobToken), "succeeded");

  nlohmann::json usage = Json(alice.Get("/v1/usage?by=job"));
  ASSERT_EQ(usage["lines"].size(), 1u) << usage.dump();  // alice sees her team only
  EXPECT_EQ(usage["lines"][0]["job_id"], id);
  double seconds = usage["lines"][0]["gpu_seconds"];
  EXPECT_GE(seconds, 2 * 0.5);
  EXPECT_LT(seconds, 2 * 30.0);
  EXPECT_NEAR(usage["lines"][0]["cost"].get<double>(), seconds / 3600 * 3.43, 0.006);
  EXPECT_EQ(alice.Get("/v1/usage?team=nlp")->status, 403);

  auto root = server_->Client(kRootToken);
  nlohmann::json report = Json(root.Get("/v1/reports/monthly"));
  ASSERT_EQ(report["teams"].size(), 2u) << report.dump();
  EXPECT_EQ(report["reconciliation"]["match"], true) << report["reconciliation"].dump();
  EXPECT_EQ(report["totals"]["jobs"], 2);
  auto csv = root.Get("/v1/reports/monthly?format=csv");
  ASSERT_EQ(csv->status, 200);
  EXPECT_EQ(csv->get_header_value("Content-Type"), "text/csv");
  EXPECT_EQ(csv->body.rfind("section,team,project,user,gpu_type,job_id,date,gpu_hours,cost", 0), 0u);
  auto html = root.Get("/v1/reports/monthly?format=html");
  EXPECT_NE(html->body.find("<svg"), std::string::npos);

  // The CLI: tables, and a report file a team lead can send on.
  EXPECT_NE(Cli("usage --by project").find("det"), std::string::npos);
  std::string file = TempPath("bill.html");
  EXPECT_NE(Cli("report --format html --out " + file, kRootToken).find("wrote"), std::string::npos);
  std::ifstream in(file);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("Cost by GPU type"), std::string::npos);
  EXPECT_NE(Cli("report", kRootToken).find("reconciliation"), std::string::npos);
  EXPECT_NE(Cli("report --format csv", kRootToken).find("team,vision"), std::string::npos);
  EXPECT_NE(Cli("budgets").find("SCOPE"), std::string::npos);
  EXPECT_NE(Cli("alerts").find("no alerts"), std::string::npos);
}

TEST_F(BillingHttp, BadParametersAreRefusedNamingTheField) {
  auto c = server_->Client(kAliceToken);
  auto field = [&](const std::string& path) {
    auto r = c.Get(path);
    EXPECT_EQ(r->status, 400) << path;
    return Json(r)["error"]["field"].get<std::string>();
  };
  EXPECT_EQ(field("/v1/reports/monthly?month=2026-13"), "month");
  EXPECT_EQ(field("/v1/reports/monthly?format=pdf"), "format");
  EXPECT_EQ(field("/v1/usage?by=colour"), "by");
  EXPECT_EQ(field("/v1/usage?from=yesterday"), "from");
  EXPECT_EQ(field("/v1/usage?from=2026-11-10&to=2026-11-01"), "to");
  EXPECT_EQ(field("/v1/usage?colour=red"), "colour");
  auto bad = c.Post("/v1/jobs", "{gpus: 1, cost_limit: -3}", "application/yaml");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json(bad)["error"]["field"], "cost_limit");
}

TEST_F(BillingHttp, AJobIsStoppedAtItsCostLimit) {
  // A100-80GB at 3.43 an hour: 0.001 is spent in about a second.
  std::string out = Cli("submit --gpus 1 --gpu-type A100-80GB --cost-limit 0.001 -o json -- sleep 600");
  nlohmann::json job = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(job.contains("id")) << out;
  std::string id = job["id"];
  ASSERT_EQ(WaitFor(id, "failed"), "failed");
  nlohmann::json done = Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id));
  EXPECT_NE(done["reason"].get<std::string>().find("cost limit"), std::string::npos) << done.dump();
  EXPECT_GE(done["cost"].get<double>(), 0.001);
  nlohmann::json alerts = Json(server_->Client(kAliceToken).Get("/v1/alerts"));
  ASSERT_FALSE(alerts["alerts"].empty());
  EXPECT_EQ(alerts["alerts"][0]["kind"], "job_cost_limit");
}

}  // namespace
}  // namespace gantry::testing
