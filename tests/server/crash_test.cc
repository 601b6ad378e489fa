// Crash safety: clients submit as fast as they can while the server is killed with
// SIGKILL at random moments and restarted. Every acknowledged job must exist exactly once
// afterwards, and no GPU may hold two exclusive jobs. The storm runs on each store: SQLite
// and PostgreSQL (a throw-away cluster, scripts/pg-scratch.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "controller_harness.h"
#include "scratch_postgres.h"
#include "server_process.h"
#include "submit_storm.h"

namespace gantry::testing {
namespace {

// A SIGTERM that comes just as the server is ready (a supervisor's restart, a test's
// second start) stops it: the stop used to be lost when it came before the listener ran.
TEST(CrashSafety, ASigtermRightAfterStartStopsTheServer) {
  for (int i = 0; i < 5; ++i) {
    std::string dir = TempPath("sigterm");
    std::filesystem::remove_all(dir);
    ServerProcess server(dir, "1x1xT4");
    server.Start();
    EXPECT_TRUE(server.TerminateWithin(20)) << "start " << i;
  }
}

// A second server on a port another one holds does not start (cpp-httplib's SO_REUSEPORT
// let it, and the two then shared the port's connections: requests went to either).
TEST(CrashSafety, ASecondServerOnAPortInUseDoesNotStart) {
  std::string dir = TempPath("port-in-use");
  std::filesystem::remove_all(dir);
  ServerProcess first(dir + "/a", "1x1xT4");
  first.Start();
  ServerProcess second(dir + "/b", "1x1xT4");
  second.AddArgs({"--listen", first.address().substr(first.address().find("://") + 3)});
  second.Launch();
  EXPECT_TRUE(second.ExitsWithin(20));
  EXPECT_NE(ReadFileNoThrow(dir + "/b/server.log").value_or("").find("cannot listen on 127.0.0.1:"), std::string::npos);
}

class CrashStorm : public ::testing::TestWithParam<std::string> {};

TEST_P(CrashStorm, KillNineNeverLosesOrDuplicatesAnAcknowledgedJob) {
  std::string dir = TempPath("crash-" + GetParam());
  std::filesystem::remove_all(dir);
  std::unique_ptr<ScratchPostgres> pg;  // outlives the server
  if (GetParam() == "postgresql") {
    pg = std::make_unique<ScratchPostgres>();
    ASSERT_FALSE(pg->url().empty());
  }
  ServerProcess server(dir, "2x4xA100-80GB");
  if (pg) server.AddArgs({"--db", pg->url()});
  server.Start();
  SubmitStorm storm(4, server.address(), kAliceToken);
  // GANTRY_CRASH_KILLS and GANTRY_CRASH_MAX_MS make a longer storm (docs/BENCHMARKS.md).
  const char* kills_env = std::getenv("GANTRY_CRASH_KILLS");
  const char* max_ms_env = std::getenv("GANTRY_CRASH_MAX_MS");
  int kills = kills_env ? std::atoi(kills_env) : 4;
  int max_ms = max_ms_env ? std::atoi(max_ms_env) : 400;
  std::mt19937 rng(42);
  for (int kill = 0; kill < kills; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, max_ms)(rng)));
    server.Kill(SIGKILL);
    server.Start();
    storm.SetAddress(server.address());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  storm.Stop();
  const std::set<std::string>& acknowledged = storm.acknowledged();

  std::printf("kill -9 storm (%s): %zu acknowledged submits across %d kill -9 restarts\n", GetParam().c_str(),
              acknowledged.size(), kills);
  EXPECT_EQ(storm.refused(), 0);
  ASSERT_GT(acknowledged.size(), 50u) << "the clients got too little through to mean anything";
  auto root = server.Client(kRootToken);
  nlohmann::json jobs = Json(root.Get("/v1/jobs?limit=10000"));
  std::map<std::string, int> by_name;
  for (const auto& j : jobs["jobs"]) by_name[j["name"].get<std::string>()]++;
  for (const std::string& key : acknowledged) EXPECT_EQ(by_name[key], 1) << key;
  for (const auto& [name, count] : by_name) EXPECT_EQ(count, 1) << name;
  // Ids are dense: no id was handed out twice or skipped by a half-written batch.
  EXPECT_EQ(jobs["jobs"][0]["id"], std::to_string(jobs["jobs"].size()));
  nlohmann::json nodes = Json(root.Get("/v1/nodes"));
  int busy = 0;
  for (const auto& n : nodes["nodes"]) {
    for (const auto& g : n["gpus"]) {
      EXPECT_LE(g["jobs"].size(), 1u);
      busy += g["jobs"].empty() ? 0 : 1;
    }
  }
  EXPECT_EQ(busy, 8);  // the first 8 jobs hold the 8 GPUs (they have no end)
  EXPECT_EQ(Json(root.Get("/v1/cluster"))["running"], 8);
}

INSTANTIATE_TEST_SUITE_P(Stores, CrashStorm, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gantry::testing
