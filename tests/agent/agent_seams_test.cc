// The node side through its seams: the job runner on a fake launcher and a clock moved by
// hand, so grace periods, memory limits and adoption are checked to the millisecond of the
// injected clock, without processes.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "agent/fake_launcher.h"
#include "agent/local_agent.h"
#include "agent/report_sink.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

constexpr TimeMs kStart = 1'800'000'000'000;

StartOrder Order(const std::string& id, int64_t memory_mib = 0) {
  JobSpec spec = MakeJob(id).spec();
  spec.command = "python3 train.py";
  StartOrder o;
  o.job_id = id;
  o.spec = std::make_shared<const JobSpec>(spec);
  o.node_id = o.leader_node = "n1";
  o.gpus.push_back({0, "GPU-aaa", "", 1000, 0, 0, "", -1});
  o.memory_mib = memory_mib;
  RunAsThisAccount(o);
  return o;
}

// Polls `done` for up to 5 s (the agent's thread acts on its own time).
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

class AgentSeamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("seams");
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<LocalAgent> NewAgent(ReportSink& sink) {
    return std::make_unique<LocalAgent>(
        LocalAgentOptions{
            .state_dir = dir_, .shim = "/nonexistent/gantry", .poll_ms = 5, .launcher = &launcher_, .clock = &clock_},
        sink);
  }
  bool HasSignal(int sig) {
    for (const auto& [pid, s] : launcher_.signals()) {
      if (s == sig) return true;
    }
    return false;
  }
  std::string dir_;
  FakeLauncher launcher_;
  ManualClock clock_{kStart};
};

TEST_F(AgentSeamsTest, AStopSendsSigtermAndSigkillExactlyAtTheGraceDeadline) {
  ReportSink sink;
  auto agent = NewAgent(sink);
  agent->Serve();
  agent->Start(Order("g1"));
  ASSERT_TRUE(Eventually([&] { return launcher_.spawned().size() == 1; }));
  SpawnRequest req = launcher_.spawned()[0].second;
  EXPECT_EQ(req.command, "python3 train.py");
  EXPECT_EQ(req.env["CUDA_VISIBLE_DEVICES"], "GPU-aaa");
  EXPECT_EQ(req.stdout_path, agent->JobDir("g1") + "/run-1/rank-0.stdout.log");
  EXPECT_EQ(req.exit_file, agent->JobDir("g1") + "/run-1-n1.exit");
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(sink.mu);
    return sink.started.size() == 1;
  }));

  agent->Stop({"g1", 1, "n1", 30'000, "preempted by job 7", ""});
  ASSERT_TRUE(Eventually([&] { return HasSignal(SIGTERM); }));
  clock_.Advance(29'999);  // 1 ms before the deadline: no SIGKILL
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(HasSignal(SIGKILL));
  EXPECT_EQ(sink.WaitExit("g1", 0), -999);
  clock_.Advance(1);  // the deadline
  EXPECT_EQ(sink.WaitExit("g1"), 137);
  EXPECT_TRUE(HasSignal(SIGKILL));
  std::lock_guard<std::mutex> lock(sink.mu);
  EXPECT_EQ(sink.exits["g1"].reason, "preempted by job 7");
  EXPECT_EQ(sink.exits["g1"].ended_ms, kStart + 30'000);  // no exit file: the agent's clock
}

TEST_F(AgentSeamsTest, HostMemoryOverTheRequestIsKilledOnTheNextSecondOfTheClock) {
  ReportSink sink;
  auto agent = NewAgent(sink);
  agent->Serve();
  agent->Start(Order("hog", 100));
  ASSERT_TRUE(Eventually([&] { return launcher_.spawned().size() == 1; }));
  pid_t pid = launcher_.spawned()[0].first;
  launcher_.SetMemory(pid, 500);
  clock_.Advance(1001);  // the check runs once a second
  EXPECT_EQ(sink.WaitExit("hog"), 137);
  EXPECT_EQ(sink.Reason("hog"), "used 500 MiB of host memory, over the 100 MiB it asked for (memory_gb)");
}

TEST_F(AgentSeamsTest, ARestartedAgentAdoptsTheRunFromItsRecordAndReportsItsExit) {
  pid_t pid = 0;
  {
    ReportSink first_sink;
    auto first = NewAgent(first_sink);
    first->Serve();
    first->Start(Order("long"));
    ASSERT_TRUE(Eventually([&] { return launcher_.spawned().size() == 1; }));
    pid = launcher_.spawned()[0].first;
    first->Shutdown();
  }
  auto record = ReadRunRecord(dir_ + "/jobs/long/run-1-n1.json");
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->pid, pid);
  EXPECT_FALSE(record->ended);

  ReportSink sink;
  auto second = NewAgent(sink);
  std::vector<RunReport> known = second->Recover();
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known[0].job_id, "long");
  EXPECT_FALSE(known[0].exited);  // still running: adopted
  second->Serve();
  clock_.Advance(5000);
  launcher_.Exit(pid, 3);
  EXPECT_EQ(sink.WaitExit("long"), 3);
  record = ReadRunRecord(dir_ + "/jobs/long/run-1-n1.json");
  ASSERT_TRUE(record.ok());
  EXPECT_TRUE(record->ended);
  EXPECT_EQ(record->exit_code, 3);
  EXPECT_EQ(record->ended_ms, kStart + 5000);
}

TEST_F(AgentSeamsTest, ALaunchThatFailsIsReportedAsAnExitWithTheReason) {
  ReportSink sink;
  auto agent = NewAgent(sink);
  agent->Serve();
  launcher_.RefuseSpawns();
  agent->Start(Order("nofork"));
  EXPECT_EQ(sink.WaitExit("nofork"), 127);
  EXPECT_EQ(sink.Reason("nofork"), "cannot fork: out of processes");
  std::lock_guard<std::mutex> lock(sink.mu);
  EXPECT_TRUE(sink.started.empty());
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
