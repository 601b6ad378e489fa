// What the dashboard reads: the stored cluster history in buckets, paged and searched job
// lists, the queue and nodes a page at a time with telemetry, each team against its quota,
// and the page itself served from the binary.
#include <gtest/gtest.h>

#include <thread>

#include "controller_harness.h"
#include "server/web_assets.h"
#include "state/history.h"

namespace gantry::testing {
namespace {

constexpr TimeMs kStart = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

PageQuery Page(int limit, int offset, bool telemetry = false, std::string team = "") {
  PageQuery p;
  p.limit = limit;
  p.offset = offset;
  p.telemetry = telemetry;
  p.team = std::move(team);
  return p;
}

TEST(History, BucketsAverageTheirSamplesAndSkipEmptyOnes) {
  auto range = ParseHistoryRange("1h", kStart);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->step_ms, 60'000);
  EXPECT_EQ(range->to - range->from, 3'600'000);
  EXPECT_FALSE(ParseHistoryRange("1y", kStart).ok());
  EXPECT_EQ(ParseHistoryRange("1y", kStart).status().field(), "range");
  TimeMs bucket = range->to - 120'000;
  std::vector<HistoryRow> rows = {
      {bucket, R"({"gpus_total": 8, "gpus_allocated": 2, "queued": 4, "running": 1, "gpu_util_pct": 50})"},
      {bucket + 30'000, R"({"gpus_total": 8, "gpus_allocated": 6, "queued": 0, "running": 3})"},
      {bucket + 60'000, R"({"gpus_total": 8, "gpus_allocated": 8, "queued": 2, "running": 4, "gpu_util_pct": 90})"},
      {range->from - 1, R"({"gpus_total": 99})"},  // before the range
      {bucket + 1, "not json"},
  };
  nlohmann::json s = HistorySeries(rows, *range);
  ASSERT_EQ(s["points"].size(), 2u) << s.dump();
  nlohmann::json first = s["points"][0];
  EXPECT_EQ(first["t"], FormatUtc(bucket));
  EXPECT_DOUBLE_EQ(first["gpus_allocated"], 4.0);
  EXPECT_DOUBLE_EQ(first["utilization"], 0.5);
  EXPECT_DOUBLE_EQ(first["queued"], 2.0);
  EXPECT_DOUBLE_EQ(first["gpu_util_pct"], 50.0);  // the one sample with telemetry
  EXPECT_DOUBLE_EQ(s["points"][1]["gpu_util_pct"], 90.0);
  EXPECT_EQ(s["step_s"], 60);
}

TEST(History, TheControllerSamplesOnTicksAndTheStoreKeepsItAcrossARestart) {
  std::string db = Harness::Fresh();
  auto every_minute = [](ControllerOptions& o) { o.history_interval_ms = 60'000; };
  {
    Harness h(db, 10, every_minute, kStart);
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    ASSERT_EQ(h.Submit("{gpus: 3, command: 'sleep 1'}", kAlice).status, 201);
    ASSERT_EQ(h.Submit("{gpus: 2, command: 'sleep 1'}", kAlice).status, 201);
    for (int minute = 1; minute <= 3; ++minute) {
      h.now = kStart + minute * 60'000;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ticks every 10 ms
    }
    h.controller->Sync();
    h.controller->Stop();
  }
  Harness h(db, 3600'000, every_minute, kStart + 4 * 60'000);
  ApiAnswer r = Api(h.controller->History("1h"));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_GE(r.body["points"].size(), 3u) << r.body.dump();
  nlohmann::json p = r.body["points"][1];
  EXPECT_DOUBLE_EQ(p["gpus_total"], 4.0);
  EXPECT_DOUBLE_EQ(p["gpus_allocated"], 3.0);
  EXPECT_DOUBLE_EQ(p["queued"], 1.0);
  EXPECT_DOUBLE_EQ(p["running"], 1.0);
  EXPECT_EQ(Api(h.controller->History("2d")).status, 400);
}

TEST(DashboardViews, JobsArePagedAndSearchedWithATotal) {
  Harness h;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(h.Submit(fmt::format("{{name: train-{}, gpus: 1, command: 'true'}}", i), kAlice).status, 201);
  }
  ASSERT_EQ(h.Submit("{name: other, gpus: 1, command: 'true'}", kBob).status, 201);
  JobFilter f;
  f.limit = 2;
  f.offset = 2;
  ApiAnswer page = Api(h.controller->ListJobs(kAlice, f));
  EXPECT_EQ(page.body["total"], 5);
  ASSERT_EQ(page.body["jobs"].size(), 2u);
  EXPECT_EQ(page.body["jobs"][0]["name"], "train-2");  // newest first: 4, 3 | 2, 1 | 0
  f = {};
  f.search = "TRAIN-3";
  ApiAnswer found = Api(h.controller->ListJobs(kAlice, f));
  ASSERT_EQ(found.body["total"], 1);
  EXPECT_EQ(found.body["jobs"][0]["name"], "train-3");
  f.search = "other";  // bob's job: not found by alice
  EXPECT_EQ(Api(h.controller->ListJobs(kAlice, f)).body["total"], 0);
  EXPECT_EQ(Api(h.controller->ListJobs(kAdmin, f)).body["total"], 1);
}

TEST(DashboardViews, TheQueueIsPagedAndAUserSeesOnlyTheirTeamsJobs) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 1)});
  ASSERT_EQ(h.Submit("{gpus: 1, command: 'sleep 100'}", kAlice).status, 201);  // runs
  std::vector<std::string> alices;
  for (int i = 0; i < 3; ++i) alices.push_back(h.Submit("{gpus: 1, command: 'true'}", kAlice).body["id"]);
  std::string bobs = h.Submit("{name: secret, gpus: 1, command: 'true'}", kBob).body["id"];
  nlohmann::json mine = Api(h.controller->Queue(kAlice, Page(2, 1))).body;
  EXPECT_EQ(mine["total"], 3);
  EXPECT_EQ(mine["other_teams_waiting"], 1);
  ASSERT_EQ(mine["queue"].size(), 2u);
  EXPECT_EQ(mine["queue"][0]["id"], alices[1]);
  EXPECT_EQ(mine["queue"][1]["position"], 3);  // places in the whole queue
  EXPECT_EQ(mine.dump().find("secret"), std::string::npos);
  nlohmann::json bob = Api(h.controller->Queue(kBob)).body;
  ASSERT_EQ(bob["queue"].size(), 1u);
  EXPECT_EQ(bob["queue"][0]["id"], bobs);
  EXPECT_EQ(bob["queue"][0]["position"], 4);
  nlohmann::json admin = Api(h.controller->Queue(kAdmin, Page(0, 0, false, "nlp"))).body;
  ASSERT_EQ(admin["queue"].size(), 1u);
  EXPECT_EQ(admin["queue"][0]["name"], "secret");
}

TEST(DashboardViews, NodesArePagedWithTelemetryAndAnotherTeamsJobHasNoName) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 2), MakeNode("n2", "A100-80GB", 2), MakeNode("n3", "A100-80GB", 2)});
  std::string bobs = h.Submit("{name: secret, gpu_fraction: 0.5, sharing: mps, command: 'sleep 100'}", kBob).body["id"];
  h.controller->Sync();
  GpuSample s;
  s.util_pct = 42;
  s.temperature_c = 61;
  s.mem_used_mib = 1000;
  s.mem_total_mib = 81920;
  h.controller->Readings({"n1", {{0, s}}});
  h.controller->Sync();
  nlohmann::json page = Api(h.controller->Nodes(kAlice, Page(2, 0, true))).body;
  EXPECT_EQ(page["total"], 3);
  ASSERT_EQ(page["nodes"].size(), 2u);
  nlohmann::json gpu = page["nodes"][0]["gpus"][0];
  EXPECT_DOUBLE_EQ(gpu["telemetry"]["utilization_pct"], 42.0);
  EXPECT_DOUBLE_EQ(gpu["telemetry"]["temperature_c"], 61.0);
  ASSERT_EQ(gpu["shares"].size(), 1u);
  EXPECT_DOUBLE_EQ(gpu["shares"][0]["share"], 0.5) << gpu.dump();
  EXPECT_FALSE(gpu["shares"][0].contains("job")) << gpu.dump();
  EXPECT_TRUE(gpu["jobs"].empty());
  EXPECT_EQ(page.dump().find("secret"), std::string::npos);
  nlohmann::json as_bob = Api(h.controller->Nodes(kBob, Page(1, 0))).body["nodes"][0]["gpus"][0];
  EXPECT_EQ(as_bob["shares"][0]["job"], bobs);
  EXPECT_EQ(as_bob["jobs"][0], bobs);
  EXPECT_EQ(Api(h.controller->Nodes(kAdmin, Page(5, 2))).body["nodes"].size(), 1u);
  nlohmann::json gpus = Api(h.controller->NodeGpus(kAlice, "n1")).body;
  EXPECT_TRUE(gpus["gpus"][0]["jobs"].empty());
}

TEST(DashboardViews, TeamsShowJobsAgainstGuaranteesAndUsersSeeTheirOwn) {
  auto quotas = [](ControllerOptions& o) {
    auto q = QuotaConfig::FromYaml(
        "teams:\n  vision: {guaranteed: {any: 2}, max_gpus: 3}\n  nlp: {guaranteed: {any: 1}}\n", o.config.catalog);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    o.config.quotas = *q;
  };
  Harness h("", 3600'000, quotas);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ASSERT_EQ(h.Submit("{gpus: 2, command: 'sleep 100'}", kAlice).status, 201);
  ASSERT_EQ(h.Submit("{gpus: 1, command: 'sleep 100'}", kAlice).status, 201);
  ASSERT_EQ(h.Submit("{gpus: 2, command: 'true'}", kAlice).status, 201);  // over vision's max: waits
  nlohmann::json mine = Api(h.controller->Teams(kAlice)).body["teams"];
  ASSERT_EQ(mine.size(), 1u) << mine.dump();
  EXPECT_EQ(mine[0]["team"], "vision");
  EXPECT_DOUBLE_EQ(mine[0]["allocated_gpus"], 3.0);
  EXPECT_DOUBLE_EQ(mine[0]["guaranteed_gpus"], 2.0);
  EXPECT_DOUBLE_EQ(mine[0]["max_gpus"], 3.0);
  EXPECT_EQ(mine[0]["running_jobs"], 2);
  EXPECT_EQ(mine[0]["pending_jobs"], 1);
  nlohmann::json all = Api(h.controller->Teams(kAdmin)).body["teams"];
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["team"], "nlp");
  EXPECT_TRUE(all[0]["max_gpus"].is_null());
}

TEST(WebAssets, ThePageAndItsScriptsAreCompiledIn) {
  const WebAsset* index = FindWebAsset("/");
  ASSERT_NE(index, nullptr);
  EXPECT_NE(std::string(index->data, index->size).find("/ui/app.js"), std::string::npos);
  EXPECT_STREQ(index->content_type, "text/html; charset=utf-8");
  for (const char* path : {"/app.js", "/lib.js", "/app.css", "/pages/queue.js", "/vendor/uplot/uPlot.iife.min.js",
                           "/vendor/uplot/LICENSE"}) {
    const WebAsset* a = FindWebAsset(path);
    ASSERT_NE(a, nullptr) << path;
    EXPECT_GT(a->size, 100u) << path;
  }
  EXPECT_EQ(FindWebAsset("/../CMakeLists.txt"), nullptr);
  EXPECT_EQ(FindWebAsset("/nope.js"), nullptr);
}

}  // namespace
}  // namespace gantry::testing
