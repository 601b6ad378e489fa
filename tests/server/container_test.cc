// Integration: container jobs through a real standalone server and podman (the CI installs
// podman, runc and busybox-static; the image is a busybox tree made by podman import). The
// job runs in the image as its team's account with Gantry's variables and its checkpoint
// directory; SIGTERM reaches its processes; its exit code and the runtime's own errors come
// back (tests/security/container_boundaries_test.cc: what the job may not do).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pwd.h>

#include "../agent/report_sink.h"
#include "agent/local_agent.h"
#include "command_util.h"
#include "container_fixture.h"

namespace gantry::testing {
namespace {

TEST_F(Containers, AJobRunsInItsImageAsItsAccountWithItsVariablesAndCheckpoints) {
  nlohmann::json job = Submit({{"gpus", 1},
                               {"container_image", kTestImage},
                               {"container_env", {{"EXTRA", "inside"}}},
                               {"command",
                                "echo \"uid=$(id -u) job=$GANTRY_JOB_ID gpu=$CUDA_VISIBLE_DEVICES extra=$EXTRA\"; "
                                "cat /etc/gantry-image; touch $GANTRY_CHECKPOINT_DIR/saved; exit 3"}});
  std::string id = job.value("id", "");
  ASSERT_EQ(WaitFor(id, "failed"), "failed") << job.dump();
  EXPECT_EQ(Job(id).value("exit_code", 0), 3);  // the container's own exit code
  std::string want = fmt::format("uid={} job={} gpu=GPU-fake-a100-80gb-0-0 extra=inside\ngantry test image\n",
                                 getpwnam("nobody")->pw_uid, id);
  EXPECT_EQ(Log(id), want);
  // The checkpoint directory is the host's, at the same path.
  EXPECT_TRUE(std::filesystem::exists(server_->data_dir() + "/agent/jobs/" + id + "/checkpoint/saved"));
  // The file that carried its variables in is gone with the run.
  EXPECT_FALSE(std::filesystem::exists(server_->data_dir() + "/agent/jobs/" + id + "/run-1/container.env"));
}

TEST_F(Containers, ACancelReachesTheContainersProcessesAndLeavesNoContainer) {
  std::string id =
      Submit({{"gpus", 1},
              {"container_image", kTestImage},
              {"command", "trap 'echo got-term; exit 0' TERM; echo ready; while true; do sleep 0.1; done"}})
          .value("id", "");
  ASSERT_EQ(WaitFor(id, "running"), "running");
  for (int i = 0; i < 1500 && Log(id).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(Log(id), "ready\n") << Job(id).dump();
  server_->Client(kAliceToken).Delete("/v1/jobs/" + id);
  ASSERT_EQ(WaitFor(id, "cancelled"), "cancelled") << Job(id).dump();
  EXPECT_EQ(Log(id), "ready\ngot-term\n");
  std::string left;
  for (int i = 0; i < 100; ++i) {
    RunCommand(fmt::format("podman ps -a --filter name=gantry-{}- --format '{{{{.Names}}}}'", id), &left);
    if (left.empty()) break;
    left.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, "");
}

TEST_F(Containers, AnImageThatIsNotThereFailsTheJobAtOnceSayingSo) {
  std::string id = Submit({{"gpus", 1},
                           {"container_image", "localhost/gantry-test:missing"},
                           {"container_pull", "never"},
                           {"command", "true"}})
                       .value("id", "");
  ASSERT_EQ(WaitFor(id, "failed"), "failed");
  EXPECT_NE(Job(id).value("reason", "").find("image not known"), std::string::npos) << Job(id).dump();
}

// A remote agent killed with SIGKILL and started again adopts a container job that kept
// running: the job ends once, in its first run, with all its output.
TEST(ContainerAdoption, AKilledAgentsContainerJobSurvivesItsRestart) {
  if (std::string why = ContainerSetupProblem(); !why.empty()) GTEST_SKIP() << why;
  std::string dir = TempPath("container-adopt");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  // The node is lost only after 20 s of silence: a restart on a loaded machine may take
  // seconds, and what is tested is the adoption, not how fast the agent comes back.
  server.AddArgs({"--node-timeout", "20"});
  std::filesystem::permissions(dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  server.Start();
  AgentProcess agent(dir, "node-a", "4xT4", {"--container-run-options", "--ulimit nproc=4096:4096"});
  agent.Start(server.address());
  auto alice = server.Client(kAliceToken);
  auto state = [&](const std::string& id) { return Json(alice.Get("/v1/jobs/" + id)).value("state", ""); };
  std::string id;
  for (int i = 0; i < 250 && id.empty(); ++i) {  // until the node has registered
    id = Json(alice.Post(
                  "/v1/jobs",
                  nlohmann::json{
                      {"gpus", 1}, {"container_image", kTestImage}, {"command", "echo started; sleep 3; echo done"}}
                      .dump(),
                  "application/json"))
             .value("id", "");
    if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(id.empty());
  for (int i = 0; i < 500 && alice.Get("/v1/jobs/" + id + "/logs")->body.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  agent.Kill(SIGKILL);
  agent.Start(server.address());  // within the node timeout
  std::string seen;
  for (int i = 0; i < 750 && (seen = state(id)) != "succeeded"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(seen, "succeeded");
  nlohmann::json job = Json(alice.Get("/v1/jobs/" + id));
  EXPECT_EQ(job["runs"], 1);  // adopted, not started again
  std::string log;
  for (int i = 0; i < 250 && (log = alice.Get("/v1/jobs/" + id + "/logs")->body) != "started\ndone\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(log, "started\ndone\n");
}

// GPU readings name processes by pid: one in a container is not in its runtime's session,
// yet it is the job's (the memory watch and idle detection rely on it).
TEST(ContainerPids, AProcessInAJobsContainerIsTheJobs) {
  if (std::string why = ContainerSetupProblem(); !why.empty()) GTEST_SKIP() << why;
  std::string dir = TempPath("container-pids");
  std::filesystem::remove_all(dir);
  ReportSink reports;
  LocalAgentOptions options{.state_dir = dir, .shim = GANTRY_BINARY, .poll_ms = 20};
  options.containers.gpu_devices = false;
  options.containers.run_options = {"--ulimit", "nproc=4096:4096"};
  LocalAgent agent(options, reports);
  agent.Serve();
  JobSpec spec;
  spec.user = "root";
  spec.team = "ops";
  spec.command = "sleep 30";
  spec.container.image = kTestImage;
  StartOrder o;
  o.job_id = "c1";
  o.node_id = o.leader_node = "n1";
  o.spec = std::make_shared<const JobSpec>(spec);
  o.allow_root = true;
  agent.Start(o);
  std::string pid_text;
  for (int i = 0; i < 200 && (pid_text.empty() || pid_text == "0\n"); ++i) {
    pid_text.clear();
    RunCommand("podman inspect --format '{{.State.Pid}}' $(podman ps -q --filter name=gantry-c1-1-n1-) 2>/dev/null",
               &pid_text);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int pid = std::atoi(pid_text.c_str());
  ASSERT_GT(pid, 0);
  std::string owner;
  for (int i = 0; i < 100 && (owner = agent.JobOfPid(pid)).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(owner, "c1");
  agent.Stop({"c1", 1, "n1", 0, "test over", ""});
  std::string gone = "x";
  for (int i = 0; i < 100 && !gone.empty(); ++i) {
    gone.clear();
    RunCommand("podman ps -a --filter name=gantry-c1-1-n1- --format '{{.Names}}'", &gone);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(gone, "");
  agent.Shutdown();
}

}  // namespace
}  // namespace gantry::testing
