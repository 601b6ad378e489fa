// The node's runs against what the machine says, on a fake node: whose account a job runs
// under (system accounts, a team's unix_account, root), the directories it is given, ports
// taken outside Gantry, a missing working directory, MPS daemons shared and released,
// containers and what a runtime's failure says, and what a session in a run is given.
#include <gtest/gtest.h>

#include "agent/fake_launcher.h"
#include "agent/fake_node_env.h"
#include "agent/node_runs.h"
#include "agent/report_sink.h"
#include "agent/test_orders.h"

namespace gantry::testing {
namespace {

const std::string kStateDir = "/var/lib/gantry";

StartOrder Order(const std::string& id, const std::string& user = "ana") {
  return TestOrder(id, "python3 train.py", user);
}

StartOrder WithSpec(StartOrder o, const std::function<void(JobSpec&)>& change) {
  JobSpec spec = *o.spec;
  change(spec);
  o.spec = std::make_shared<const JobSpec>(spec);
  return o;
}

class NodeRunsEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.privileged = true;
    env_.users["root"] = {"root", 0, 0};
    env_.users["ana"] = {"ana", 1001, 1001};
    env_.users["postgres"] = {"postgres", 112, 120};
    env_.users["vision-svc"] = {"vision-svc", 2000, 2000};
  }
  std::unique_ptr<NodeRuns> NewRuns(NodeRunsOptions options = {}) {
    options.state_dir = kStateDir;
    options.shim = "/usr/bin/gantry";
    return std::make_unique<NodeRuns>(options, sink_, env_, launcher_, clock_);
  }
  // The exit a start that did not run was reported with: code and reason.
  std::pair<int, std::string> Refusal(const std::string& id) {
    std::lock_guard<std::mutex> lock(sink_.mu);
    if (!sink_.exits.count(id)) return {-999, "not reported"};
    return {sink_.exits[id].exit_code, sink_.exits[id].reason};
  }
  ReportSink sink_;
  FakeNodeEnv env_;
  FakeLauncher launcher_;
  ManualClock clock_{1'800'000'000'000};
};

TEST_F(NodeRunsEnvTest, ARootAgentRunsTheJobAsItsUserWithDirectoriesOfTheirOwn) {
  auto runs = NewRuns();
  runs->Start(Order("j1"));
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  EXPECT_EQ(launcher_.spawned()[0].second.user, "ana");
  const std::string dir = kStateDir + "/jobs/j1";
  for (const std::string& d : {dir + "/work", dir + "/checkpoint"}) {
    EXPECT_EQ(env_.dirs.at(d).uid, 1001u) << d;
    EXPECT_EQ(env_.dirs.at(d).gid, 1001u) << d;
  }
  EXPECT_EQ(env_.dirs.at(dir).uid, 0u);  // logs and run records stay the agent's
}

TEST_F(NodeRunsEnvTest, ASystemAccountRunsNoJobWhateverTheProviderCallsThePerson) {
  auto runs = NewRuns();
  runs->Start(Order("sys", "postgres"));
  auto [code, reason] = Refusal("sys");
  EXPECT_EQ(code, 126);
  EXPECT_NE(reason.find("refused to run as 'postgres'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("uid 112"), std::string::npos) << reason;
  env_.users["nobody"] = {"nobody", 65534, 65534};
  env_.users["dyn"] = {"dyn", 61200, 61200};
  runs->Start(Order("nfs", "nobody"));
  runs->Start(Order("dyn", "dyn"));
  EXPECT_EQ(Refusal("nfs").first, 126);
  EXPECT_EQ(Refusal("dyn").first, 126);
  EXPECT_TRUE(launcher_.spawned().empty());
}

TEST_F(NodeRunsEnvTest, AUserWithoutAnAccountRunsAsTheTeamsUnixAccountOrNotAtAll) {
  auto runs = NewRuns();
  StartOrder mapped = Order("mapped", "carl");
  mapped.unix_account = "vision-svc";
  runs->Start(mapped);
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  EXPECT_EQ(launcher_.spawned()[0].second.user, "vision-svc");
  runs->Start(Order("lost", "carl"));
  EXPECT_EQ(Refusal("lost"),
            (std::pair<int, std::string>{126,
                                         "no Unix user 'carl' on node n1, and team vision names no unix_account for "
                                         "such users (users.yaml teams.vision.unix_account)"}));
  StartOrder missing = Order("missing", "carl");
  missing.unix_account = "nosuch";
  runs->Start(missing);
  EXPECT_EQ(Refusal("missing"),
            (std::pair<int, std::string>{126, "no Unix user 'nosuch' (team vision's unix_account) on node n1"}));
}

TEST_F(NodeRunsEnvTest, RootOnlyWhereTheTeamMayAndAsTheAgentItself) {
  auto runs = NewRuns();
  runs->Start(Order("r1", "root"));
  EXPECT_EQ(Refusal("r1"),
            (std::pair<int, std::string>{
                126, "refused to run as root: team vision may not (users.yaml teams.vision.allow_root)"}));
  StartOrder allowed = Order("r2", "root");
  allowed.allow_root = true;
  runs->Start(allowed);
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  EXPECT_EQ(launcher_.spawned()[0].second.user, "");
  // --run-jobs-as agent: everyone's job is the agent's (root), under the same policy.
  auto as_agent = NewRuns({.run_as = RunAs::kAgent});
  as_agent->Start(Order("r3"));
  EXPECT_EQ(Refusal("r3").first, 126);
}

TEST_F(NodeRunsEnvTest, DirectoriesThatCannotBeGivenToTheUserFailTheStart) {
  env_.chown_fails = true;
  auto runs = NewRuns();
  runs->Start(Order("j1"));
  auto [code, reason] = Refusal("j1");
  EXPECT_EQ(code, 126);
  EXPECT_EQ(reason, "cannot give " + kStateDir + "/jobs/j1/work to ana");
}

TEST_F(NodeRunsEnvTest, AMissingWorkingDirectoryOrATakenPortFailsTheStartSayingWhich) {
  auto runs = NewRuns();
  runs->Start(WithSpec(Order("wd"), [](JobSpec& s) { s.working_dir = "/data/nope"; }));
  EXPECT_EQ(Refusal("wd"), (std::pair<int, std::string>{127, "working_dir: no directory /data/nope on node n1"}));
  env_.taken_ports.insert(20001);
  StartOrder web = Order("web");
  web.ports = {{"tensorboard", 20001}};
  runs->Start(web);
  auto [code, reason] = Refusal("web");
  EXPECT_EQ(code, 125);
  EXPECT_NE(reason.find("port 20001 (tensorboard) on node n1 is taken by a process Gantry did not start"),
            std::string::npos)
      << reason;
  StartOrder gang = Order("gang");
  gang.master_port = 20001;
  runs->Start(gang);
  EXPECT_NE(Refusal("gang").second.find("(MASTER_PORT)"), std::string::npos);
  EXPECT_TRUE(launcher_.spawned().empty());
  web.job_id = "web2";
  web.ports = {{"tensorboard", 20002}};
  runs->Start(web);
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  EXPECT_EQ(launcher_.spawned()[0].second.env.at("GANTRY_PORT_TOKEN"), "token-web2-1");
}

TEST_F(NodeRunsEnvTest, MpsJobsShareOneDaemonPerGpuWhichQuitsWithTheLast) {
  auto runs = NewRuns({.mps_daemons = true});
  auto mps = [](const std::string& id) {
    StartOrder o = Order(id);
    o.sharing = SharingMode::kMps;
    o.gpus[0].milli = 500;
    o.gpus[0].mps_thread_percent = 50;
    return o;
  };
  runs->Start(mps("m1"));
  runs->Start(mps("m2"));
  EXPECT_EQ(env_.mps_started, std::vector<std::string>{"GPU-aaa"});
  ASSERT_EQ(launcher_.spawned().size(), 2u);
  const auto env = launcher_.spawned()[1].second.env;
  EXPECT_EQ(env.at("CUDA_MPS_PIPE_DIRECTORY"), kStateDir + "/mps/GPU-aaa/pipe");
  EXPECT_EQ(env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  launcher_.Exit(launcher_.spawned()[0].first, 0);
  runs->Tick();
  EXPECT_TRUE(env_.mps_quit.empty());  // m2 still uses it
  launcher_.Exit(launcher_.spawned()[1].first, 0);
  runs->Tick();
  EXPECT_EQ(env_.mps_quit, std::vector<std::string>{"GPU-aaa"});
  // A daemon that cannot start fails the start, and nothing is held for it.
  env_.mps_fails = true;
  runs->Start(mps("m3"));
  EXPECT_EQ(Refusal("m3"), (std::pair<int, std::string>{127, "nvidia-cuda-mps-control -d failed with status 1"}));
  env_.mps_fails = false;
  runs->Start(mps("m4"));
  EXPECT_EQ(env_.mps_started, (std::vector<std::string>{"GPU-aaa", "GPU-aaa"}));
}

TEST_F(NodeRunsEnvTest, AContainerRunsAsTheJobsAccountInsideAndIsCleanedUpAfter) {
  env_.groups["ana"] = {1001, 27, 44};
  auto runs = NewRuns();
  runs->Start(WithSpec(Order("box"), [](JobSpec& s) { s.container.image = "pytorch:24.05"; }));
  ASSERT_EQ(env_.containers_prepared.size(), 1u);
  const ContainerJob job = env_.containers_prepared[0];  // its order pointer is the start's, gone now
  EXPECT_EQ(job.uid, 1001u);
  EXPECT_EQ(job.groups, (std::vector<gid_t>{1001, 27, 44}));  // its groups reach the mounts
  EXPECT_FALSE(job.as_root);
  EXPECT_EQ(job.env.at("GANTRY_JOB_ID"), "box");
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  const SpawnRequest req = launcher_.spawned()[0].second;
  EXPECT_EQ(req.argv, (std::vector<std::string>{"podman", "run", "--name", "gantry-box-1"}));
  EXPECT_EQ(req.user, "");       // the runtime runs as the agent
  EXPECT_TRUE(req.env.empty());  // the job's variables are in its env file, not the runtime's
  const std::string run_dir = kStateDir + "/jobs/box/run-1";
  env_.files[run_dir + "/container.env"] = "HF_TOKEN=secret\n";
  env_.last_log[run_dir + "/rank-0.stderr.log"] = "Error: short-name resolution enforced";
  launcher_.Exit(launcher_.spawned()[0].first, 125);
  runs->Tick();
  EXPECT_EQ(Refusal("box"), (std::pair<int, std::string>{125, "container runtime: short-name resolution enforced"}));
  EXPECT_EQ(env_.containers_removed, std::vector<std::string>{"gantry-box-1"});
  EXPECT_EQ(env_.mounts_released, std::vector<std::string>{run_dir + "/mounts"});
  EXPECT_FALSE(env_.Exists(run_dir + "/container.env"));  // the job's secrets go with it
  env_.container_refused = true;
  runs->Start(WithSpec(Order("nobox"), [](JobSpec& s) { s.container.image = "missing:1"; }));
  EXPECT_EQ(Refusal("nobox"), (std::pair<int, std::string>{125, "no image 'missing:1' on this node"}));
}

TEST_F(NodeRunsEnvTest, ASessionGetsTheRunsAccountEnvironmentCgroupAndContainer) {
  env_.cgroups = true;
  auto runs = NewRuns();
  StreamOrder exec;
  exec.session = "0123456789abcdef0123";
  exec.job_id = "s1";
  exec.node_id = "n1";
  EXPECT_EQ(runs->SessionTargetFor(exec).status().code(), StatusCode::kNotFound);  // not started yet
  StartOrder o = WithSpec(Order("s1"), [](JobSpec& s) { s.container.image = "pytorch:24.05"; });
  o.ports = {{"web", 20005}};
  runs->Start(o);
  auto target = runs->SessionTargetFor(exec);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->user, "ana");
  EXPECT_EQ(target->env.at("GANTRY_JOB_ID"), "s1");
  EXPECT_EQ(target->env.at("GANTRY_PORT_TOKEN"), "token-s1-1");
  EXPECT_EQ(target->cgroup_procs, env_.CgroupProcs("s1-1-n1"));
  EXPECT_EQ(target->container_exec, (std::vector<std::string>{"podman", "exec"}));
  EXPECT_EQ(target->container, "gantry-s1-1");
  EXPECT_EQ(target->exit_file, kStateDir + "/jobs/s1/session-0123456789abcdef.exit");
  // A port session reaches only a port lent to the run, and learns whose it is.
  StreamOrder port = exec;
  port.kind = StreamKind::kPort;
  port.port = 22;
  EXPECT_EQ(runs->SessionTargetFor(port).status().code(), StatusCode::kPermissionDenied);
  port.port = 20005;
  auto lent = runs->SessionTargetFor(port);
  ASSERT_TRUE(lent.ok());
  EXPECT_EQ(lent->port_name, "web");
  EXPECT_EQ(lent->uid, 1001u);
}

// An agent that is not root runs every job as itself: a port session checks the listener
// against the agent's own uid (it was checked against root's, and refused every port).
TEST_F(NodeRunsEnvTest, AnUnprivilegedAgentsJobsAreItsOwnPortsToo) {
  env_.privileged = false;
  auto runs = NewRuns();
  StartOrder o = Order("web");
  o.ports = {{"web", 20006}};
  runs->Start(o);
  ASSERT_EQ(launcher_.spawned().size(), 1u);
  EXPECT_EQ(launcher_.spawned()[0].second.user, "");  // as the agent itself
  StreamOrder port;
  port.job_id = "web";
  port.node_id = "n1";
  port.kind = StreamKind::kPort;
  port.port = 20006;
  auto target = runs->SessionTargetFor(port);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->uid, 990u);
  EXPECT_EQ(target->user, "");
}

}  // namespace
}  // namespace gantry::testing
