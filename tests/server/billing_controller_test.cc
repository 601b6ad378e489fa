// Accounting in the controller: ledger intervals per run, exact across restarts and agent
// reports, reconciled with the job event history; budgets that alert and hold, job cost
// limits, idle jobs; worked with a hand-moved clock and A100-80GB at 3.43 per GPU-hour.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "controller_harness.h"
#include "webhook_sink.h"

namespace gantry::testing {
namespace {

const TimeMs kNov10 = Utc("2026-11-10T00:00:00Z");

nlohmann::json Usage(Harness& h, const std::string& by, const Actor& who = kAdmin) {
  UsageQuery q;
  q.from = Utc("2026-11-01T00:00:00Z");
  q.by = by;
  ApiAnswer r = Api(h.controller->Usage(who, q));
  EXPECT_EQ(r.status, 200) << r.body.dump();
  return r.body;
}

std::function<void(ControllerOptions&)> Quotas(const std::string& yaml) {
  return [yaml](ControllerOptions& o) {
    auto q = QuotaConfig::FromYaml(yaml, o.config.catalog);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    o.config.quotas = *q;
    o.ledger_flush_ms = 0;
  };
}

TEST(Ledger, EveryRunIsBilledAndSurvivesARestart) {
  std::string db;
  std::string whole, quarter;
  {
    Harness h("", 3600 * 1000, {}, kNov10);
    db = h.db;
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    whole = h.Submit("{gpus: 2, project: det, command: 'true'}", kAlice).body["id"];
    quarter = h.Submit("{gpu_fraction: 0.25, sharing: mps, command: 'true'}", kBob).body["id"];
    h.now += 90 * kMinuteMs;
    h.controller->RunExited(ExitReport(whole, 1, "n1", 0, ""));
    h.controller->Sync();
    h.now += 150 * kMinuteMs;
    h.controller->RunExited(ExitReport(quarter, 1, "n1", 0, ""));
    h.controller->Sync();
    // 2 GPUs x 1.5 h = 3 GPU-h = 10.29; a quarter GPU x 4 h = 1 GPU-h = 3.43.
    EXPECT_DOUBLE_EQ(Api(h.controller->GetJob(kAlice, whole)).body["cost"], 10.29);
    EXPECT_DOUBLE_EQ(Api(h.controller->GetJob(kBob, quarter)).body["cost"], 3.43);
    h.controller.reset();  // as if killed
  }
  Harness h(db, 3600 * 1000, {}, kNov10 + 5 * kHourMs);
  nlohmann::json teams = Usage(h, "team");
  ASSERT_EQ(teams["lines"].size(), 2u);
  EXPECT_EQ(teams["lines"][0]["team"], "vision");
  EXPECT_DOUBLE_EQ(teams["lines"][0]["gpu_hours"], 3.0);
  EXPECT_DOUBLE_EQ(teams["lines"][0]["cost"], 10.29);
  EXPECT_DOUBLE_EQ(teams["lines"][1]["gpu_seconds"], 3600.0);
  EXPECT_DOUBLE_EQ(teams["total"]["cost"], 13.72);
  nlohmann::json projects = Usage(h, "project");
  EXPECT_EQ(projects["lines"][0]["project"], "det");
  // Users see their own team only.
  nlohmann::json mine = Usage(h, "user", kBob);
  ASSERT_EQ(mine["lines"].size(), 1u);
  EXPECT_EQ(mine["lines"][0]["user"], "bob");
  UsageQuery other;
  other.team = "vision";
  EXPECT_EQ(Api(h.controller->Usage(kBob, other)).status, 403);
}

TEST(Ledger, AMigSliceIsBilledAsItsShareOfTheGpu) {
  Harness h("", 3600 * 1000, {}, kNov10);
  h.Attach({MakeMigNode("h1", "H100-80GB", 1, {0}, {})});
  ApiAnswer r = h.Submit("{mig_profile: 3g.40gb, command: 'true'}", kAlice);
  ASSERT_EQ(r.body["state"], "running") << r.body.dump();
  h.now += 7 * kHourMs;
  h.controller->RunExited(ExitReport(r.body["id"], 1, "h1", 0, ""));
  h.controller->Sync();
  // 3 of the H100's 7 compute slices for 7 hours: 3 GPU-hours at 6.88 = 20.64.
  nlohmann::json u = Usage(h, "gpu_type");
  ASSERT_EQ(u["lines"].size(), 1u);
  EXPECT_DOUBLE_EQ(u["lines"][0]["gpu_hours"], 3.0);
  EXPECT_DOUBLE_EQ(u["lines"][0]["cost"], 20.64);
}

TEST(Ledger, AnExitDuringAServerOutageIsBilledToTheAgentsTime) {
  std::string db, id;
  {
    Harness h("", 3600 * 1000, {}, kNov10);
    db = h.db;
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    id = h.Submit("{gpus: 1, command: 'sleep 1000'}", kAlice).body["id"];
    h.controller->Sync();
    h.controller.reset();  // the server dies with the interval open
  }
  // Two hours later the server is back; the agent says the job ended one hour in.
  Harness h(db, 3600 * 1000, {}, kNov10 + 2 * kHourMs);
  RunReport ended{id, 1, "n1", true, 0, "", kNov10 + kHourMs};
  ASSERT_TRUE(h.controller->AttachNodes({MakeNode("n1", "A100-80GB", 4)}, &h.link, {ended}).ok());
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "succeeded");
  nlohmann::json u = Usage(h, "job");
  ASSERT_EQ(u["lines"].size(), 1u);
  EXPECT_DOUBLE_EQ(u["lines"][0]["gpu_seconds"], 3600.0);
  EXPECT_DOUBLE_EQ(u["lines"][0]["cost"], 3.43);
}

TEST(Ledger, APreemptedJobHasAnIntervalPerRunAndTheReportReconciles) {
  Harness h("", 3600 * 1000, {}, kNov10);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string victim = h.Submit("{gpus: 4, priority: low, command: 'sleep 1000'}", kAlice).body["id"];
  h.now += 11 * kMinuteMs;
  std::string urgent = h.Submit("{gpus: 4, priority: critical, command: 'true'}", kBob).body["id"];
  h.now += kMinuteMs;
  h.controller->RunExited(ExitReport(victim, 1, "n1", 143, ""));  // checkpointed after 12 minutes
  h.controller->Sync();
  h.now += 30 * kMinuteMs;
  h.controller->RunExited(ExitReport(urgent, 1, "n1", 0, ""));
  h.controller->Sync();
  ASSERT_EQ(Api(h.controller->GetJob(kAlice, victim)).body["runs"], 2);
  h.now += 60 * kMinuteMs;
  h.controller->RunExited(ExitReport(victim, 2, "n1", 0, ""));
  h.controller->Sync();
  // victim: 4 GPUs x (12 + 60) minutes = 4.8 GPU-h; urgent: 4 x 30 minutes = 2 GPU-h.
  nlohmann::json jobs = Usage(h, "job");
  ASSERT_EQ(jobs["lines"].size(), 2u);
  EXPECT_EQ(jobs["lines"][0]["job_id"], victim);
  EXPECT_DOUBLE_EQ(jobs["lines"][0]["gpu_hours"], 4.8);
  EXPECT_DOUBLE_EQ(jobs["lines"][1]["gpu_hours"], 2.0);
  ApiAnswer report = Api(h.controller->MonthlyReport(kAdmin, "2026-11"));
  ASSERT_EQ(report.status, 200) << report.body.dump();
  EXPECT_DOUBLE_EQ(report.body["totals"]["gpu_hours"], 6.8);
  EXPECT_DOUBLE_EQ(report.body["reconciliation"]["ledger_gpu_seconds"], 6.8 * 3600);
  EXPECT_DOUBLE_EQ(report.body["reconciliation"]["event_history_gpu_seconds"], 6.8 * 3600);
  EXPECT_EQ(report.body["reconciliation"]["match"], true);
  EXPECT_EQ(Api(h.controller->MonthlyReport(kAdmin, "2026-13")).status, 400);
}

TEST(Ledger, AnIntervalAcrossMidnightOfTheMonthCountsInBothMonths) {
  Harness h("", 3600 * 1000, {}, Utc("2026-11-30T22:00:00Z"));
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string id = h.Submit("{gpus: 1, command: 'true'}", kAlice).body["id"];
  h.now += 4 * kHourMs;
  h.controller->RunExited(ExitReport(id, 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_DOUBLE_EQ(Api(h.controller->MonthlyReport(kAdmin, "2026-11")).body["totals"]["gpu_hours"], 2.0);
  EXPECT_DOUBLE_EQ(Api(h.controller->MonthlyReport(kAdmin, "2026-12")).body["totals"]["gpu_hours"], 2.0);
  EXPECT_DOUBLE_EQ(Api(h.controller->MonthlyReport(kAlice, "2026-12")).body["totals"]["cost"], 6.86);
}

TEST(Budgets, AlertAt80And100PercentThenHoldTheTeamsNewJobs) {
  WebhookSink sink;
  Harness h("", 20,
            Quotas("accounting: {webhook: '" + sink.url() +
                   "'}\nteams:\n  vision: {budget: {monthly_cost: 10, on_exceed: hold}}\n"),
            kNov10);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string first = h.Submit("{gpus: 1, command: 'sleep 1000'}", kAlice).body["id"];
  h.now += 150 * kMinuteMs;  // 2.5 h x 3.43 = 8.575: 86%
  ASSERT_TRUE(WaitFor([&] { return sink.kinds().size() == 1; }));
  EXPECT_EQ(sink.kinds()[0], "budget_warning");
  h.now += 30 * kMinuteMs;  // 10.29: spent
  ASSERT_TRUE(WaitFor([&] { return sink.kinds().size() == 2; }));
  EXPECT_EQ(sink.kinds()[1], "budget_exceeded");
  ApiAnswer held = h.Submit("{gpus: 1, command: 'true'}", kAlice);
  EXPECT_EQ(held.body["state"], "pending");
  ApiAnswer queue = Api(h.controller->Queue(kAlice));
  ASSERT_EQ(queue.body["queue"].size(), 1u);
  EXPECT_NE(queue.body["queue"][0]["reason"].get<std::string>().find("budget of team vision is spent"),
            std::string::npos)
      << queue.body.dump();
  // Other teams go on.
  EXPECT_EQ(h.Submit("{gpus: 1, command: 'true'}", kBob).body["state"], "running");
  ApiAnswer budgets = Api(h.controller->Budgets(kAlice));
  ASSERT_EQ(budgets.body["budgets"].size(), 1u);
  EXPECT_EQ(budgets.body["budgets"][0]["held"], true);
  EXPECT_EQ(budgets.body["budgets"][0]["level"], 100);
  EXPECT_NE(h.controller->Metrics().find("gantry_budget_held{team=\"vision\",project=\"\"} 1"), std::string::npos);
  EXPECT_EQ(Api(h.controller->Alerts(kAlice)).body["alerts"].size(), 2u);
  EXPECT_EQ(Api(h.controller->Alerts(kBob)).body["alerts"].size(), 0u);
  // A new month releases the hold; the running job's alerts are not sent twice.
  h.now = Utc("2026-12-01T00:00:10Z");
  ASSERT_TRUE(WaitFor([&] { return h.State(held.body["id"], kAlice) == "running"; }));
  (void)first;
}

TEST(Budgets, AlertsAreNotSentAgainAfterARestart) {
  std::string db;
  auto config = Quotas("teams:\n  vision: {budget: {monthly_gpu_hours: 1}}\n");
  {
    Harness h("", 20, config, kNov10);
    db = h.db;
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    h.Submit("{gpus: 2, command: 'sleep 1000'}", kAlice);
    h.now += 40 * kMinuteMs;  // 1.33 GPU-h of 1
    ASSERT_TRUE(WaitFor([&] { return Api(h.controller->Alerts(kAdmin)).body["alerts"].size() == 1; }));
  }
  Harness h(db, 20, config, kNov10 + 50 * kMinuteMs);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  nlohmann::json alerts = Api(h.controller->Alerts(kAdmin)).body["alerts"];
  ASSERT_EQ(alerts.size(), 1u);  // the alert came back from the store, and no second one was sent
  EXPECT_EQ(alerts[0]["kind"], "budget_exceeded");
  EXPECT_NEAR(Api(h.controller->Budgets(kAdmin)).body["budgets"][0]["used"]["gpu_hours"].get<double>(), 100.0 / 60,
              1e-6);
}

TEST(CostLimit, WarnsAt80PercentAndStopsAt100UnlessTheClassIsExempt) {
  Harness h("", 20, Quotas(""), kNov10);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string capped = h.Submit("{gpus: 1, cost_limit: 5, command: 'sleep 1000'}", kAlice).body["id"];
  std::string exempt =
      h.Submit("{gpus: 1, priority: critical, cost_limit: 5, command: 'sleep 1000'}", kAlice).body["id"];
  h.now += 72 * kMinuteMs;  // 1.2 h x 3.43 = 4.116: 82%
  ASSERT_TRUE(WaitFor([&] { return Api(h.controller->Alerts(kAlice)).body["alerts"].size() == 2; }));
  EXPECT_EQ(h.State(capped, kAlice), "running");
  h.now += 18 * kMinuteMs;  // 5.145
  ASSERT_TRUE(WaitFor([&] { return h.State(capped, kAlice) == "stopping"; }));
  h.controller->RunExited(ExitReport(capped, 1, "n1", 143, ""));
  h.controller->Sync();
  ApiAnswer job = Api(h.controller->GetJob(kAlice, capped));
  EXPECT_EQ(job.body["state"], "failed");
  EXPECT_NE(job.body["reason"].get<std::string>().find("cost limit 5.00 USD reached"), std::string::npos);
  EXPECT_EQ(h.State(exempt, kAlice), "running");  // critical work overruns with an alert
  nlohmann::json kinds = nlohmann::json::array();
  nlohmann::json alerts = Api(h.controller->Alerts(kAlice)).body["alerts"];
  for (const auto& a : alerts) kinds.push_back(a["kind"]);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "job_cost_limit"), 2) << kinds.dump();
}

TEST(IdleJobs, FlaggedAfterTheConfiguredTimeAndStoppedWhenTheTeamSaysSo) {
  Harness h("", 20,
            Quotas("accounting: {idle_threshold_percent: 5, idle_after: 30m}\n"
                   "teams:\n  vision: {idle_action: stop}\n"),
            kNov10);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string lazy = h.Submit("{gpus: 1, command: 'sleep 1000'}", kAlice).body["id"];
  std::string busy = h.Submit("{gpus: 1, command: 'sleep 1000'}", kBob).body["id"];
  auto readings = [&](int lazy_gpu, double lazy_util) {
    GpuSample idle, working;
    idle.util_pct = lazy_util;
    working.util_pct = 90;
    h.controller->Readings({"n1", {{lazy_gpu, idle}, {1 - lazy_gpu, working}}});
    h.controller->Sync();  // read at this clock time
  };
  h.controller->Sync();
  int lazy_gpu = Api(h.controller->GetJob(kAlice, lazy)).body["placement"][0]["gpus"][0]["index"];
  readings(lazy_gpu, 1);
  h.now += 20 * kMinuteMs;
  readings(lazy_gpu, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(h.State(lazy, kAlice), "running");  // 20 minutes: not yet
  h.now += 11 * kMinuteMs;
  readings(lazy_gpu, 0);
  ASSERT_TRUE(WaitFor([&] { return h.State(lazy, kAlice) == "stopping"; }))
      << Api(h.controller->Events(kAdmin, lazy)).body.dump() << Usage(h, "job").dump();
  EXPECT_EQ(h.State(busy, kBob), "running");
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, lazy)).body["idle"], true);
  EXPECT_NE(h.controller->Metrics().find("gantry_job_idle{job=\"" + lazy + "\""), std::string::npos);
  h.controller->RunExited(ExitReport(lazy, 1, "n1", 143, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(lazy, kAlice), "failed");
  nlohmann::json report = Api(h.controller->MonthlyReport(kAdmin, "2026-11")).body;
  ASSERT_EQ(report["idle_jobs"].size(), 1u);
  EXPECT_EQ(report["idle_jobs"][0]["job_id"], lazy);
  // Utilization in the ledger: the lazy job's readings averaged 1%.
  nlohmann::json jobs = Usage(h, "job");
  for (const auto& l : jobs["lines"]) {
    double expected = l["job_id"] == lazy ? 1.0 : 90.0;
    EXPECT_DOUBLE_EQ(l["avg_utilization_pct"], expected) << l.dump();
  }
}

TEST(IdleJobs, AShareIsMeasuredAgainstItsShareNotTheWholeGpu) {
  // Two MPS quarters on one GPU, idle threshold 10%. Job "small" uses 3% of the GPU's SMs:
  // 12% of its quarter, busy. Job "tiny" uses 2%: 8% of its quarter, idle after 30 minutes.
  // Against the whole GPU both would have looked idle.
  Harness h("", 20, Quotas("accounting: {idle_threshold_percent: 10, idle_after: 30m}\n"), kNov10);
  h.Attach({MakeNode("n1", "A100-80GB", 1)});
  std::string small = h.Submit("{gpu_fraction: 0.25, command: 'sleep 1000'}", kAlice).body["id"];
  std::string tiny = h.Submit("{gpu_fraction: 0.25, command: 'sleep 1000'}", kBob).body["id"];
  h.controller->Sync();
  nlohmann::json view = Api(h.controller->GetJob(kAlice, small)).body;
  EXPECT_EQ(view["sharing"], "mps") << view.dump();  // a plain fraction on a node with MPS
  EXPECT_EQ(view["spec"]["sharing"], "auto");
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.starts.size(), 2u);
    EXPECT_EQ(h.link.starts[0].sharing, SharingMode::kMps);
    EXPECT_EQ(h.link.starts[0].gpus[0].mps_thread_percent, 25);
    EXPECT_EQ(h.link.starts[0].gpus[0].memory_mib, 20480);  // a quarter of 80 GiB, pinned
  }
  auto readings = [&] {
    GpuSample s;
    s.util_pct = 5;
    s.processes = {{101, 2000, 3, -1, small}, {102, 1000, 2, -1, tiny}};
    h.controller->Readings({"n1", {{0, s}}});
    h.controller->Sync();
  };
  readings();
  view = Api(h.controller->GetJob(kAlice, small)).body;
  ASSERT_EQ(view["gpu_use"].size(), 1u) << view.dump();
  EXPECT_EQ(view["gpu_use"][0]["sm_util_pct"], 3.0);
  EXPECT_EQ(view["gpu_use"][0]["share_used_pct"], 12.0);
  EXPECT_EQ(view["gpu_use"][0]["memory_used_mib"], 2000);
  EXPECT_EQ(view["gpu_use"][0]["source"], "process");
  h.now += 31 * kMinuteMs;
  readings();
  ASSERT_TRUE(WaitFor([&] { return Api(h.controller->GetJob(kBob, tiny)).body.value("idle", false); }));
  EXPECT_FALSE(Api(h.controller->GetJob(kAlice, small)).body.value("idle", false));
}

}  // namespace
}  // namespace gantry::testing
