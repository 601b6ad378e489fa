// The job runner's thread shell (LocalAgent) on a fake node, a fake launcher and a clock
// moved by hand: orders reach the runs on its thread, its ticks end them, and a restarted
// shell adopts what the first left running. What the runs decide is tested input by input
// in node_runs_test.cc; this is only the thread around them.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "agent/fake_launcher.h"
#include "agent/fake_node_env.h"
#include "agent/local_agent.h"
#include "agent/report_sink.h"
#include "agent/test_orders.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

constexpr TimeMs kStart = 1'800'000'000'000;

class AgentShellTest : public ::testing::Test {
 protected:
  std::unique_ptr<LocalAgent> NewAgent(ReportSink& sink) {
    return std::make_unique<LocalAgent>(LocalAgentOptions{.state_dir = "/var/lib/gantry",
                                                          .shim = "/nonexistent/gantry",
                                                          .poll_ms = 5,
                                                          .launcher = &launcher_,
                                                          .clock = &clock_,
                                                          .env = &env_},
                                        sink);
  }
  // Whether `done` came true within 5 s (the shell's thread acts on its own time).
  template <typename F>
  static bool Eventually(F done) {
    for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  }
  bool Spawned(size_t n) {
    return Eventually([&] { return launcher_.spawned().size() >= n; });
  }
  FakeNodeEnv env_;
  FakeLauncher launcher_;
  ManualClock clock_{kStart};
};

TEST_F(AgentShellTest, OrdersReachTheRunsOnItsThreadAndItsTicksEndThem) {
  ReportSink sink;
  auto agent = NewAgent(sink);
  agent->Serve();
  agent->Start(TestOrder("g1"));
  ASSERT_TRUE(Spawned(1));
  EXPECT_EQ(agent->JobOfPid(launcher_.spawned()[0].first), "g1");
  agent->Stop({"g1", 1, "n1", 30'000, "preempted by job 7", ""});
  ASSERT_TRUE(Eventually([&] { return !launcher_.signals().empty(); }));  // SIGTERM: the stop was taken
  clock_.Advance(30'000);                                                 // the grace deadline: the next tick kills it
  EXPECT_EQ(sink.WaitExit("g1"), 137);
  EXPECT_EQ(sink.Reason("g1"), "preempted by job 7");
  EXPECT_TRUE(agent->ActiveRuns().empty());
}

TEST_F(AgentShellTest, ARestartedShellAdoptsTheRunTheFirstLeftRunning) {
  {
    ReportSink first_sink;
    auto first = NewAgent(first_sink);
    first->Serve();
    first->Start(TestOrder("long"));
    ASSERT_TRUE(Spawned(1));
    first->Shutdown();  // the jobs keep running
  }
  pid_t pid = launcher_.spawned()[0].first;
  ReportSink sink;
  auto second = NewAgent(sink);
  std::vector<RunReport> known = second->Recover();
  ASSERT_EQ(known.size(), 1u);
  EXPECT_FALSE(known[0].exited);
  ASSERT_EQ(second->ActiveRuns().size(), 1u);
  second->Serve();
  launcher_.Exit(pid, 3);
  EXPECT_EQ(sink.WaitExit("long"), 3);
}

TEST(RunRecord, AMalformedRecordIsAnErrorNamingTheFile) {
  std::string path = TempPath("bad-record.json");
  std::ofstream(path) << R"({"job_id": 7})";
  auto r = ReadRunRecord(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), path);
  std::ofstream(path, std::ios::trunc) << "not json";
  EXPECT_FALSE(ReadRunRecord(path).ok());
}

}  // namespace
}  // namespace gantry::testing
