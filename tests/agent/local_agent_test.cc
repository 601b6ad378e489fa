// The in-process agent with real processes: environment per sharing mode, logs, exit
// codes, SIGTERM then SIGKILL after the grace period, and adoption by a new agent.
#include "agent/local_agent.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/fake_provider.h"
#include "agent/report_sink.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

StartOrder Order(const std::string& id, const std::string& command, SharingMode mode = SharingMode::kExclusive) {
  JobSpec spec = MakeJob(id).spec();
  spec.command = command;
  StartOrder o;
  o.job_id = id;
  o.run = 1;
  o.spec = std::make_shared<const JobSpec>(spec);
  o.node_id = "n1";
  o.leader_node = "n1";
  o.sharing = mode;
  o.gpus.push_back({0, "GPU-aaa", "", 1000, 0, 0, "", -1});
  if (mode == SharingMode::kMps) o.gpus[0] = {2, "GPU-ccc", "", 300, 30, 20480, "", -1};
  RunAsThisAccount(o);
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

class LocalAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("agent");
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<LocalAgent> NewAgent(RunAs run_as = RunAs::kAuto, const std::string& mps_control = "") {
    auto a = std::make_unique<LocalAgent>(
        LocalAgentOptions{
            .state_dir = dir_, .shim = GANTRY_BINARY, .poll_ms = 20, .run_as = run_as, .mps_control = mps_control},
        reports_);
    return a;
  }
  std::string dir_;
  ReportSink reports_;
};

TEST_F(LocalAgentTest, RunsTheCommandWithItsEnvironmentAndLogs) {
  auto agent = NewAgent();
  agent->Serve();
  agent->Start(Order("j1", "echo $CUDA_VISIBLE_DEVICES $GANTRY_JOB_ID $GANTRY_RESTART_COUNT; echo err >&2; exit 3"));
  EXPECT_EQ(reports_.WaitExit("j1"), 3);
  EXPECT_EQ(ReadFile(agent->JobDir("j1") + "/run-1/rank-0.stdout.log"), "GPU-aaa j1 0\n");
  EXPECT_EQ(ReadFile(agent->JobDir("j1") + "/run-1/rank-0.stderr.log"), "err\n");
  EXPECT_TRUE(std::filesystem::is_directory(agent->JobDir("j1") + "/checkpoint"));
}

// A MIG start: the agent makes the planned instance first and gives the job its device;
// it will not destroy an instance while a process runs on the GPU.
TEST_F(LocalAgentTest, MakesThePlannedMigInstanceAndRefusesToTouchABusyGpu) {
  GpuInventory inv;
  GpuInfo h100;
  h100.uuid = "GPU-h100";
  h100.name = "H100-80GB";
  h100.mig_enabled = true;
  inv.gpus.push_back(h100);
  FakeGpuProvider gpus(inv);
  LocalAgent agent(
      LocalAgentOptions{.state_dir = dir_, .shim = GANTRY_BINARY, .poll_ms = 20, .gpus = &gpus, .load_sink = &gpus},
      reports_);
  agent.Serve();
  StartOrder small = Order("small", "echo $CUDA_VISIBLE_DEVICES", SharingMode::kMig);
  small.gpus[0] = {0, "GPU-h100", "", 428, 0, 40960, "3g.40gb", 4};
  small.mig.push_back({0, "GPU-h100", {}, {{"3g.40gb", 4}}});
  agent.Start(small);
  ASSERT_EQ(reports_.WaitExit("small"), 0);
  std::string device = ReadFile(agent.JobDir("small") + "/run-1/rank-0.stdout.log");
  EXPECT_EQ(device.rfind("MIG-fake-GPU-h100-", 0), 0u) << device;
  {
    std::lock_guard<std::mutex> lock(reports_.mu);
    ASSERT_EQ(reports_.mig.size(), 1u);
    EXPECT_EQ(reports_.mig[0].error, "");
    ASSERT_EQ(reports_.mig[0].devices.size(), 1u);
    EXPECT_EQ(reports_.mig[0].devices[0].uuid + "\n", device);
  }
  // Re-partition to 7g.80gb while some process holds the GPU: refused, the job fails with why.
  gpus.SetLoad("GPU-h100", 0.4, 1000, {{4321, 1000}});
  StartOrder big = Order("big", "true", SharingMode::kMig);
  big.gpus[0] = {0, "GPU-h100", "", 1000, 0, 81920, "7g.80gb", 0};
  big.mig.push_back({0, "GPU-h100", {{"3g.40gb", 4}}, {{"7g.80gb", 0}}});
  agent.Start(big);
  EXPECT_EQ(reports_.WaitExit("big"), 125);
  std::lock_guard<std::mutex> lock(reports_.mu);
  EXPECT_NE(reports_.exits["big"].reason.find("process 4321 runs on the GPU"), std::string::npos)
      << reports_.exits["big"].reason;
  ASSERT_EQ(reports_.mig.size(), 2u);
  EXPECT_EQ(reports_.mig[1].devices.size(), 1u);  // the 3g.40gb is still there
  EXPECT_EQ(gpus.mig_changes(), 1);
}

TEST_F(LocalAgentTest, AJobOverItsHostMemoryIsKilledWithTheReason) {
  auto agent = NewAgent();
  agent->Serve();
  // tail keeps what has no newline, and holds it while its reader never reads: the watch,
  // once a second, always finds it over its limit however slow the machine. A job's memory
  // is its session's, the job shim's too (about 200 MiB in a sanitized build, a few MiB
  // otherwise): the limits leave room for it.
  StartOrder hog = Order("hog", "head -c 800M /dev/zero | tail | sleep 600");
  hog.memory_mib = 600;
  StartOrder small = Order("small", "head -c 50M /dev/zero | tail; echo done");
  small.memory_mib = 600;
  agent->Start(hog);
  agent->Start(small);
  EXPECT_EQ(reports_.WaitExit("hog", 30), 137);
  EXPECT_EQ(reports_.WaitExit("small", 30), 0) << [&] {
    std::lock_guard<std::mutex> lock(reports_.mu);
    return reports_.exits["small"].reason;
  }();
  std::lock_guard<std::mutex> lock(reports_.mu);
  EXPECT_NE(reports_.exits["hog"].reason.find("MiB of host memory, over the 600 MiB it asked for"), std::string::npos)
      << reports_.exits["hog"].reason;
}

StartOrder AsUser(StartOrder o, const std::string& user) {
  JobSpec spec = *o.spec;
  spec.user = user;
  o.spec = std::make_shared<const JobSpec>(spec);
  o.unix_account.clear();
  o.allow_root = false;
  return o;
}

// A person's account made for the test (uid 1000 and up), removed at its end.
struct TestAccount {
  std::string name = fmt::format("gtla{}", ::getpid() % 100000);
  TestAccount() { std::system(("useradd -M -N " + name + " 2>/dev/null").c_str()); }
  ~TestAccount() { std::system(("userdel " + name + " 2>/dev/null").c_str()); }
};

TEST_F(LocalAgentTest, ARootAgentRunsJobsAsTheirUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TestAccount person;
  struct passwd* pw = getpwnam(person.name.c_str());
  ASSERT_NE(pw, nullptr) << "useradd " << person.name;
  const std::string home = pw->pw_dir;
  auto agent = NewAgent(RunAs::kUser);
  agent->Serve();
  agent->Start(AsUser(Order("u1",
                            "id -un; echo $HOME; touch $GANTRY_CHECKPOINT_DIR/saved && "
                            "stat -c %U $GANTRY_CHECKPOINT_DIR/saved"),
                      person.name));
  agent->Start(AsUser(Order("u2", "true"), "no-such-user-here"));
  // A person named like a system account (a provider's or a typo's) does not run as it; a
  // team's unix_account, which an admin names, may be one.
  agent->Start(AsUser(Order("u3", "id -un"), "daemon"));
  StartOrder team_account = AsUser(Order("u4", "id -un"), "no-such-user-here");
  team_account.unix_account = "daemon";
  agent->Start(team_account);
  agent->Start(AsUser(Order("u5", "id -un"), "nobody"));  // the overflow uid: no one's own account
  EXPECT_EQ(reports_.WaitExit("u1"), 0);
  EXPECT_EQ(reports_.WaitExit("u5"), 126);
  EXPECT_EQ(reports_.WaitExit("u3"), 126);
  EXPECT_EQ(reports_.WaitExit("u4"), 0);
  EXPECT_EQ(ReadFile(agent->JobDir("u4") + "/run-1/rank-0.stdout.log"), "daemon\n");
  EXPECT_EQ(ReadFile(agent->JobDir("u1") + "/run-1/rank-0.stdout.log"),
            fmt::format("{0}\n{1}\n{0}\n", person.name, home));
  EXPECT_EQ(reports_.WaitExit("u2"), 126);
  std::lock_guard<std::mutex> lock(reports_.mu);
  EXPECT_NE(reports_.exits["u2"].reason.find("no Unix user 'no-such-user-here'"), std::string::npos);
  EXPECT_NE(reports_.exits["u3"].reason.find("refused to run as 'daemon'"), std::string::npos)
      << reports_.exits["u3"].reason;
  EXPECT_NE(reports_.exits["u3"].reason.find("system account (uid 1: below the agent's --min-job-uid 1000"),
            std::string::npos)
      << reports_.exits["u3"].reason;
  EXPECT_NE(reports_.exits["u5"].reason.find("refused to run as 'nobody'"), std::string::npos)
      << reports_.exits["u5"].reason;
}

TEST_F(LocalAgentTest, TheFirstMpsJobOnAGpuStartsItsDaemonAndTheLastOneStopsIt) {
  // A stand-in for nvidia-cuda-mps-control that writes down how it was called.
  std::filesystem::create_directories(dir_);
  std::string control = dir_ + "/mps-control", calls = dir_ + "/calls";
  std::ofstream(control) << "#!/bin/sh\n"
                         << "if [ \"$1\" = -d ]; then echo \"start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY\" >> "
                         << calls << "; else read c; echo \"$c $CUDA_VISIBLE_DEVICES\" >> " << calls << "; fi\n";
  auto agent = NewAgent(RunAs::kAuto, "/bin/sh " + control);  // works where /tmp is noexec too
  agent->Serve();
  agent->Start(Order("m1", "echo $CUDA_MPS_PIPE_DIRECTORY; sleep 0.3", SharingMode::kMps));
  agent->Start(Order("m2", "sleep 0.6", SharingMode::kMps));
  EXPECT_EQ(reports_.WaitExit("m1"), 0);
  EXPECT_EQ(ReadFile(calls), "start GPU-ccc " + dir_ + "/mps/GPU-ccc/pipe\n");  // one daemon for both jobs
  EXPECT_EQ(reports_.WaitExit("m2"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ReadFile(calls), "start GPU-ccc " + dir_ + "/mps/GPU-ccc/pipe\nquit GPU-ccc\n");
  EXPECT_EQ(ReadFile(agent->JobDir("m1") + "/run-1/rank-0.stdout.log"), dir_ + "/mps/GPU-ccc/pipe\n");
  // A control program that fails: the job fails at once, saying why.
  std::ofstream(control, std::ios::trunc) << "#!/bin/sh\nexit 3\n";
  agent->Start(Order("m3", "true", SharingMode::kMps));
  EXPECT_EQ(reports_.WaitExit("m3"), 127);
  std::lock_guard<std::mutex> lock(reports_.mu);
  EXPECT_NE(reports_.exits["m3"].reason.find("starting the MPS control daemon for GPU-ccc"), std::string::npos);
}

TEST_F(LocalAgentTest, MpsJobsGetTheirLimits) {
  StartOrder o = Order("m1", "true", SharingMode::kMps);
  auto env = LocalAgent::JobEnvironment(o, "/ckpt");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "30");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=20480M");
  EXPECT_EQ(env["GANTRY_SHARING"], "mps");
  EXPECT_FALSE(env["GANTRY_GPU_FRACTION"].empty());  // the share, as for a time-sliced job
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-ccc");
  EXPECT_EQ(env["GANTRY_CHECKPOINT_DIR"], "/ckpt");
  StartOrder t = Order("t1", "true", SharingMode::kTimeSlice);
  t.gpus[0].milli = 250;
  EXPECT_EQ(LocalAgent::JobEnvironment(t, "/c")["GANTRY_GPU_FRACTION"], "0.25");
  StartOrder mig = Order("g1", "true", SharingMode::kMig);
  mig.gpus[0].mig_uuid = "MIG-123";
  EXPECT_EQ(LocalAgent::JobEnvironment(mig, "/c")["CUDA_VISIBLE_DEVICES"], "MIG-123");
}

TEST_F(LocalAgentTest, AGangRankGetsWhatTorchrunReads) {
  StartOrder o = Order("g1", "true");
  o.node_rank = 1;
  o.num_nodes = 2;
  o.leader_node = "n0";
  o.master_addr = "10.0.0.5";
  o.master_port = 20007;
  o.node_address = "10.0.0.6";
  o.ports = {{"jupyter", 20008}};
  auto env = LocalAgent::JobEnvironment(o, "/ckpt");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.5");
  EXPECT_EQ(env["MASTER_PORT"], "20007");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["NPROC_PER_NODE"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
  EXPECT_EQ(env["GANTRY_NODE_ADDRESS"], "10.0.0.6");
  EXPECT_EQ(env["GANTRY_PORT_JUPYTER"], "20008");
}

TEST_F(LocalAgentTest, ALentPortThatAnotherProcessHoldsFailsTheStartSayingSo) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto agent = NewAgent();
  agent->Serve();
  StartOrder o = Order("p1", "echo started");
  o.master_port = ntohs(addr.sin_port);
  agent->Start(o);
  EXPECT_EQ(reports_.WaitExit("p1"), 125);
  close(fd);
  std::lock_guard<std::mutex> lock(reports_.mu);
  EXPECT_NE(reports_.exits["p1"].reason.find("is taken by a process Gantry did not start"), std::string::npos)
      << reports_.exits["p1"].reason;
}

TEST_F(LocalAgentTest, StopSendsSigtermThenSigkillAfterTheGrace) {
  auto agent = NewAgent();
  agent->Serve();
  // Polite: ends on SIGTERM with its own code.
  agent->Start(Order("polite", "trap 'exit 42' TERM; touch " + dir_ + "/p; while true; do sleep 0.05; done"));
  // Stubborn: ignores SIGTERM, so SIGKILL ends it after the grace period.
  agent->Start(Order("stubborn", "trap '' TERM; touch " + dir_ + "/s; while true; do sleep 0.05; done"));
  // Signal only once both have set their traps.
  for (int i = 0; i < 500 && !(std::filesystem::exists(dir_ + "/p") && std::filesystem::exists(dir_ + "/s")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto t0 = std::chrono::steady_clock::now();
  agent->Stop(StopOrder{"polite", 1, "n1", 5000, "cancel", ""});
  agent->Stop(StopOrder{"stubborn", 1, "n1", 700, "cancel", ""});
  EXPECT_EQ(reports_.WaitExit("polite"), 42);
  EXPECT_EQ(reports_.WaitExit("stubborn"), 137);  // 128 + SIGKILL
  double polite_s = std::chrono::duration<double>(reports_.exit_times["polite"] - t0).count();
  double stubborn_s = std::chrono::duration<double>(reports_.exit_times["stubborn"] - t0).count();
  EXPECT_LT(polite_s, 1.0);
  EXPECT_GE(stubborn_s, 0.7);
  EXPECT_LT(stubborn_s, 3.0);
}

TEST_F(LocalAgentTest, AJobThatSavedItsCheckpointIsStoppedAtOnce) {
  auto agent = NewAgent();
  agent->Serve();
  // Ignores SIGTERM, saves, and says so: the agent need not wait the 30 s grace period.
  agent->Start(Order("saver", "trap 'touch \"$GANTRY_CHECKPOINT_DONE\"' TERM; touch " + dir_ +
                                  "/ready; while true; do sleep 0.05; done"));
  for (int i = 0; i < 500 && !std::filesystem::exists(dir_ + "/ready"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto t0 = std::chrono::steady_clock::now();
  agent->Stop(StopOrder{"saver", 1, "n1", 30000, "preempted", ""});
  EXPECT_EQ(reports_.WaitExit("saver"), 137);
  EXPECT_LT(std::chrono::duration<double>(reports_.exit_times["saver"] - t0).count(), 5.0);
}

TEST_F(LocalAgentTest, ANewAgentAdoptsARunThatKeptGoing) {
  std::string marker = dir_ + "/go";
  {
    auto first = NewAgent();
    first->Serve();
    first->Start(Order("long", "touch " + dir_ + "/up; while [ ! -e " + marker + " ]; do sleep 0.05; done; exit 7"));
    for (int i = 0; i < 500 && !std::filesystem::exists(dir_ + "/up"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    first->Shutdown();  // the agent goes away; the job does not
  }
  auto second = NewAgent();
  std::vector<RunReport> found = second->Recover();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].job_id, "long");
  EXPECT_FALSE(found[0].exited);  // still running: adopted, not restarted
  second->Serve();
  std::ofstream(marker) << "now\n";
  EXPECT_EQ(reports_.WaitExit("long"), 7);  // its exit status, read from the shim's file
}

}  // namespace
}  // namespace gantry::testing
