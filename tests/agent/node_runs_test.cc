// The node's runs as logic, input by input: a fake node (FakeNodeEnv), a launcher without
// processes and a clock moved by hand, with no thread and no sleep. Grace periods, saved
// checkpoints, memory limits, holds, adoption after a restart and failed launches are
// checked to the millisecond of the injected clock.
#include "agent/node_runs.h"

#include <gtest/gtest.h>

#include "agent/fake_launcher.h"
#include "agent/fake_node_env.h"
#include "agent/report_sink.h"
#include "agent/test_orders.h"

namespace gantry::testing {
namespace {

constexpr TimeMs kStart = 1'800'000'000'000;
const std::string kStateDir = "/var/lib/gantry";

StartOrder Order(const std::string& id, const std::string& command = "python3 train.py") {
  return TestOrder(id, command);
}

class NodeRunsTest : public ::testing::Test {
 protected:
  std::unique_ptr<NodeRuns> NewRuns(NodeRunsOptions options = {}) {
    options.state_dir = kStateDir;
    options.shim = "/usr/bin/gantry";
    return std::make_unique<NodeRuns>(options, sink_, env_, launcher_, clock_,
                                      [this](const std::string& key) { ended_keys_.push_back(key); });
  }
  std::vector<int> Signals() {
    std::vector<int> out;
    for (const auto& [pid, signal] : launcher_.signals()) out.push_back(signal);
    return out;
  }
  bool Ended(const std::string& id) {
    std::lock_guard<std::mutex> lock(sink_.mu);
    return sink_.exits.count(id) > 0;
  }
  RunReport Exit(const std::string& id) {
    std::lock_guard<std::mutex> lock(sink_.mu);
    return sink_.exits.at(id);
  }
  ReportSink sink_;
  FakeNodeEnv env_;
  FakeLauncher launcher_;
  ManualClock clock_{kStart};
  std::vector<std::string> ended_keys_;
};

TEST_F(NodeRunsTest, AStartLaunchesTheShimWithTheJobsFilesAndReportsItStarted) {
  auto runs = NewRuns();
  runs->Start(Order("g1"));
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  const SpawnRequest req = launcher_.spawned()[0].second;
  const std::string dir = kStateDir + "/jobs/g1";
  EXPECT_EQ(req.shim, "/usr/bin/gantry");
  EXPECT_EQ(req.command, "python3 train.py");
  EXPECT_EQ(req.working_dir, dir + "/work");
  EXPECT_EQ(req.job_working_dir, "");  // none given: the job stays in its work directory
  EXPECT_EQ(req.stdout_path, dir + "/run-1/rank-0.stdout.log");
  EXPECT_EQ(req.exit_file, dir + "/run-1-n1.exit");
  EXPECT_EQ(req.env.at("CUDA_VISIBLE_DEVICES"), "GPU-aaa");
  EXPECT_EQ(req.user, "");  // an unprivileged agent runs jobs as itself
  // The job's own directories are private; the job directory only lets them be reached.
  EXPECT_EQ(env_.dirs.at(dir).mode, 0711u);
  EXPECT_EQ(env_.dirs.at(dir + "/work").mode, 0700u);
  EXPECT_EQ(env_.dirs.at(dir + "/checkpoint").mode, 0700u);
  EXPECT_EQ(env_.dirs.at(dir + "/run-1").mode, 0700u);
  ASSERT_TRUE(env_.records.count(dir + "/run-1-n1.json"));
  EXPECT_EQ(env_.records.at(dir + "/run-1-n1.json").pid, launcher_.spawned()[0].first);
  EXPECT_EQ(sink_.started, std::vector<std::string>{"g1"});
  ASSERT_EQ(runs->ActiveRuns().size(), 1u);
  EXPECT_EQ(runs->JobOfPid(launcher_.spawned()[0].first), "g1");
  // The same order again (a restarted controller resends it): nothing new.
  runs->Start(Order("g1"));
  EXPECT_EQ(launcher_.spawned().size(), 1u);
}

TEST_F(NodeRunsTest, AStopSendsSigtermAndSigkillExactlyAtTheGraceDeadline) {
  auto runs = NewRuns();
  runs->Start(Order("g1"));
  runs->Stop({"g1", 1, "n1", 30'000, "preempted by job 7", ""});
  EXPECT_EQ(Signals(), std::vector<int>{SIGTERM});
  clock_.Advance(29'999);  // 1 ms before the deadline: no SIGKILL
  runs->Tick();
  EXPECT_EQ(Signals(), std::vector<int>{SIGTERM});
  EXPECT_FALSE(Ended("g1"));
  clock_.Advance(1);  // the deadline
  runs->Tick();
  ASSERT_TRUE(Ended("g1"));
  EXPECT_EQ(Exit("g1").exit_code, 137);
  EXPECT_EQ(Exit("g1").reason, "preempted by job 7");
  EXPECT_EQ(Exit("g1").ended_ms, kStart + 30'000);              // no exit file: the agent's clock
  EXPECT_EQ(ended_keys_, std::vector<std::string>{"g1/1/n1"});  // its sessions are told
  EXPECT_TRUE(runs->ActiveRuns().empty());
  const RunRecord& record = env_.records.at(kStateDir + "/jobs/g1/run-1-n1.json");
  EXPECT_TRUE(record.ended);
  EXPECT_EQ(record.exit_code, 137);
}

TEST_F(NodeRunsTest, ASavedCheckpointEndsTheGracePeriodAtTheNextTick) {
  auto runs = NewRuns();
  runs->Start(Order("ck"));
  runs->Stop({"ck", 1, "n1", 600'000, "preempted by job 9", ""});
  const std::string done = kStateDir + "/jobs/ck/checkpoint/checkpoint-done";
  env_.files[done] = "";
  clock_.Advance(50);
  runs->Tick();
  ASSERT_TRUE(Ended("ck"));
  EXPECT_EQ(Exit("ck").ended_ms, kStart + 50);
  EXPECT_FALSE(env_.Exists(done));  // the next run's checkpoint starts afresh
}

TEST_F(NodeRunsTest, HostMemoryOverTheRequestIsKilledOnTheNextSecondOfTheClock) {
  auto runs = NewRuns();
  StartOrder hog = Order("hog");
  hog.memory_mib = 100;
  runs->Start(hog);
  runs->Tick();  // a check: within its request
  pid_t pid = launcher_.spawned()[0].first;
  launcher_.SetMemory(pid, 500);
  clock_.Advance(999);
  runs->Tick();
  EXPECT_FALSE(Ended("hog"));  // the check runs once a second
  clock_.Advance(1);
  runs->Tick();
  ASSERT_TRUE(Ended("hog"));
  EXPECT_EQ(Exit("hog").exit_code, 137);
  EXPECT_EQ(Exit("hog").reason, "used 500 MiB of host memory, over the 100 MiB it asked for (memory_gb)");
}

TEST_F(NodeRunsTest, InACgroupTheKernelEnforcesMemoryAndAnOomKillIsNamed) {
  env_.cgroups = true;
  auto runs = NewRuns();
  StartOrder o = Order("oom");
  o.memory_mib = 100;
  o.cpus = 4;
  runs->Start(o);
  const std::string cgroup = "oom-1-n1";
  ASSERT_TRUE(env_.cgroups_made.count(cgroup));
  EXPECT_EQ(env_.cgroups_made.at(cgroup), (std::pair<int, int64_t>{4, 100}));
  EXPECT_EQ(launcher_.spawned()[0].second.cgroup_procs, env_.CgroupProcs(cgroup));
  launcher_.SetMemory(launcher_.spawned()[0].first, 500);
  clock_.Advance(2000);
  runs->Tick();
  EXPECT_FALSE(Ended("oom"));  // not watched from /proc: the kernel holds it
  env_.oom_kills[cgroup] = 1;
  launcher_.Exit(launcher_.spawned()[0].first, 137);
  runs->Tick();
  ASSERT_TRUE(Ended("oom"));
  EXPECT_EQ(Exit("oom").reason, "killed by the kernel: over its memory limit of 100 MiB (memory_gb)");
  EXPECT_EQ(env_.cgroups_removed, std::vector<std::string>{cgroup});
}

TEST_F(NodeRunsTest, ACgroupThatCannotBeMadeFailsTheStartWithItsReason) {
  env_.cgroups = true;
  env_.cgroup_fails = true;
  auto runs = NewRuns();
  runs->Start(Order("nocg"));
  ASSERT_TRUE(Ended("nocg"));
  EXPECT_EQ(Exit("nocg").exit_code, 127);
  EXPECT_EQ(Exit("nocg").reason, "cannot write cgroup.subtree_control: Device or resource busy");
  EXPECT_TRUE(launcher_.spawned().empty());
  EXPECT_TRUE(sink_.started.empty());
}

TEST_F(NodeRunsTest, ALaunchThatFailsIsReportedAsAnExitAndReleasesItsCgroup) {
  env_.cgroups = true;
  auto runs = NewRuns();
  launcher_.RefuseSpawns();
  runs->Start(Order("nofork"));
  ASSERT_TRUE(Ended("nofork"));
  EXPECT_EQ(Exit("nofork").exit_code, 127);
  EXPECT_EQ(Exit("nofork").reason, "cannot fork: out of processes");
  EXPECT_TRUE(sink_.started.empty());
  EXPECT_EQ(env_.cgroups_removed, std::vector<std::string>{"nofork-1-n1"});
  EXPECT_TRUE(runs->ActiveRuns().empty());
}

TEST_F(NodeRunsTest, AHoldEndsAtItsTimeOrWhenItsShellEndsWithTheShellsStatus) {
  auto runs = NewRuns();
  StartOrder timed = Order("hold", "");
  JobSpec spec = *timed.spec;
  spec.hold_gpus_ms = 60'000;
  timed.spec = std::make_shared<const JobSpec>(spec);
  runs->Start(timed);
  runs->Start(Order("shell", ""));           // no time: until its shell ends
  EXPECT_TRUE(launcher_.spawned().empty());  // no process: GPUs held
  EXPECT_EQ(sink_.started.size(), 2u);
  clock_.Advance(59'999);
  runs->Tick();
  EXPECT_FALSE(Ended("hold"));
  clock_.Advance(1);
  runs->Tick();
  ASSERT_TRUE(Ended("hold"));
  EXPECT_EQ(Exit("hold").exit_code, 0);
  EXPECT_FALSE(Ended("shell"));
  runs->EndHold("shell/1/n1", 3);
  runs->Tick();
  ASSERT_TRUE(Ended("shell"));
  EXPECT_EQ(Exit("shell").exit_code, 3);  // as gantry shell's command ended (salloc's habit)
}

TEST_F(NodeRunsTest, AStopForARunThatIsNotHereIsAnsweredAsEnded) {
  auto runs = NewRuns();
  runs->Stop({"ghost", 2, "n1", 0, "cancelled", ""});
  ASSERT_TRUE(Ended("ghost"));
  EXPECT_EQ(Exit("ghost").exit_code, 143);
  EXPECT_EQ(Exit("ghost").reason, "not running on this node");
}

TEST_F(NodeRunsTest, ARestartedAgentAdoptsLiveRunsAndReportsThoseThatEndedWhileAway) {
  pid_t live = 0, gone = 0;
  {
    auto first = NewRuns();
    first->Start(Order("live"));
    first->Start(Order("gone"));
    live = launcher_.spawned()[0].first;
    gone = launcher_.spawned()[1].first;
  }
  launcher_.Exit(gone, 0);
  // The shim of "gone" ended with no exit file (killed): a lost run, not a success.
  auto second = NewRuns();
  std::vector<RunReport> known = second->Recover();
  ASSERT_EQ(known.size(), 2u);
  std::map<std::string, RunReport> by_job;
  for (const RunReport& r : known) by_job[r.job_id] = r;
  EXPECT_FALSE(by_job["live"].exited);  // still running: adopted
  EXPECT_TRUE(by_job["gone"].exited);
  EXPECT_EQ(by_job["gone"].exit_code, 137);
  EXPECT_EQ(by_job["gone"].reason, "the job's process ended while no agent watched it");
  EXPECT_EQ(second->JobOfPid(live), "live");
  EXPECT_EQ(env_.capped.size(), 2u);  // what they wrote while no agent watched: held to the cap
  clock_.Advance(5000);
  launcher_.Exit(live, 3);
  second->Tick();
  ASSERT_TRUE(Ended("live"));
  EXPECT_EQ(Exit("live").exit_code, 3);
  const RunRecord& record = env_.records.at(kStateDir + "/jobs/live/run-1-n1.json");
  EXPECT_TRUE(record.ended);
  EXPECT_EQ(record.ended_ms, kStart + 5000);
}

// What runs on each GPU, as the fake GPUs' readings are told.
struct LoadSink : GpuLoadSink {
  void SetLoad(const std::string& uuid, double share, int64_t, std::vector<std::pair<int, int64_t>>) override {
    shares[uuid] = share;
  }
  std::map<std::string, double> shares;
};

TEST_F(NodeRunsTest, AnAdoptedRunKeepsItsGpusAndItsCheckpointStillEndsItsGrace) {
  {
    auto first = NewRuns();
    first->Start(Order("ckpt"));
  }
  LoadSink load;
  auto second = NewRuns({.load_sink = &load});
  ASSERT_EQ(second->Recover().size(), 1u);
  EXPECT_EQ(load.shares["GPU-aaa"], 1.0);  // the adopted run still holds its GPU
  second->Stop({"ckpt", 1, "n1", 600'000, "preempted by job 4", ""});
  env_.files[kStateDir + "/jobs/ckpt/checkpoint/checkpoint-done"] = "";
  clock_.Advance(10);
  second->Tick();
  ASSERT_TRUE(Ended("ckpt"));  // not after the ten minutes of grace
  EXPECT_EQ(Exit("ckpt").ended_ms, kStart + 10);
  EXPECT_EQ(load.shares["GPU-aaa"], 0.0);
}

TEST_F(NodeRunsTest, AChildOfTheJobBelongsToItThroughItsSessionOrItsContainer) {
  auto runs = NewRuns();
  runs->Start(Order("a"));
  pid_t shim = launcher_.spawned()[0].first;
  env_.session_of[shim + 100] = shim;  // a worker the job forked
  EXPECT_EQ(runs->JobOfPid(shim + 100), "a");
  EXPECT_EQ(runs->JobOfPid(777), "");  // nobody's
  StartOrder boxed = Order("boxed");
  JobSpec spec = *boxed.spec;
  spec.container.image = "pytorch:24.05";
  boxed.spec = std::make_shared<const JobSpec>(spec);
  runs->Start(boxed);
  ASSERT_EQ(env_.containers_prepared.size(), 1u);
  const std::string cid_file = kStateDir + "/jobs/boxed/run-1/container.id";
  env_.files[cid_file] = "c0ffee\n";  // the runtime wrote its container's id
  env_.container_of_pid[4242] = "c0ffee";
  runs->Tick();
  EXPECT_EQ(runs->JobOfPid(4242), "boxed");  // in the container, not in the runtime's session
}

}  // namespace
}  // namespace gantry::testing
