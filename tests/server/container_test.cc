// Integration: container jobs through a real standalone server and podman (the CI installs
// podman, runc and busybox-static; the image is a busybox tree made by podman import). The
// job runs in the image as its team's account with Gantry's variables and its checkpoint
// directory; SIGTERM reaches its processes; its exit code and the runtime's own errors come
// back; images and mounts outside the site's policy are refused at submit.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pwd.h>

#include "../agent/report_sink.h"
#include "agent/local_agent.h"
#include "command_util.h"
#include "server_fixture.h"

namespace gantry::testing {
namespace {

constexpr const char* kImage = "localhost/gantry-test:1";

// podman and the test image, or why the tests cannot run here.
std::string ContainerSetupProblem() {
  static const std::string problem = [] {
    std::string out;
    if (RunCommand("command -v podman 2>&1", &out) != 0) return std::string("podman is not installed");
    std::string script = std::string(GANTRY_SOURCE_DIR) + "/tests/containers/make-test-image.sh";
    if (RunCommand(fmt::format("bash {} {} 2>&1", script, kImage), &out) != 0) return "cannot make the image: " + out;
    return std::string();
  }();
  return problem;
}

class Containers : public ServerTest {
 protected:
  void SetUp() override {
    if (std::string why = ContainerSetupProblem(); !why.empty()) GTEST_SKIP() << why;
    std::string dir = TempPath("containers");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir, "1x4xA100-80GB");
    std::ofstream(dir + "/config/team_quotas.yaml")
        << "container_mount_roots: [/tmp]\n"
        << "teams:\n  vision: {allowed_images: ['localhost/gantry-test:*']}\n";
    // This machine refuses the agent's own process limit inside a container (see the user guide).
    server_->AddArgs({"--container-run-options", "--ulimit nproc=4096:4096"});
    server_->Start();
  }
  nlohmann::json Submit(const nlohmann::json& spec, int* status = nullptr) {
    auto r = server_->Client(kAliceToken).Post("/v1/jobs", spec.dump(), "application/json");
    if (status) *status = r ? r->status : 0;
    return Json(r);
  }
  nlohmann::json Job(const std::string& id) { return Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id)); }
  std::string Log(const std::string& id) { return server_->Client(kAliceToken).Get("/v1/jobs/" + id + "/logs")->body; }
};

TEST_F(Containers, AJobRunsInItsImageAsItsAccountWithItsVariablesAndCheckpoints) {
  nlohmann::json job = Submit({{"gpus", 1},
                               {"container_image", kImage},
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
}

TEST_F(Containers, ACancelReachesTheContainersProcessesAndLeavesNoContainer) {
  std::string id =
      Submit({{"gpus", 1},
              {"container_image", kImage},
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

TEST_F(Containers, ImagesAndMountsOutsideThePolicyAreRefusedNamingTheField) {
  struct Case {
    nlohmann::json extra;
    const char* field;
  } cases[] = {
      {{{"container_image", "localhost/gantry-test:1; rm -rf /"}}, "container_image"},
      {{{"container_image", "docker.io/library/ubuntu:24.04"}}, "container_image"},  // not an allowed image
      {{{"container_image", kImage}, {"container_mounts", {"/etc:/etc"}}}, "container_mounts[0]"},
      {{{"container_image", kImage}, {"container_mounts", {"/tmp/x:/x", "/:/host"}}}, "container_mounts[1]"},
      {{{"container_image", kImage}, {"container_mounts", {"/tmp/../etc:/x"}}}, "container_mounts[0]"},
      {{{"container_image", kImage}, {"container_pull", "sometimes"}}, "container_pull"},
      {{{"container_image", kImage}, {"container_env", {{"A", "two\nlines"}}}}, "container_env.A"},
      {{{"container_mounts", {"/tmp:/tmp"}}}, "container_image"},
      {{{"container_image", kImage}, {"container_runtime", "docker"}}, "container_runtime"},
  };
  for (const Case& c : cases) {
    nlohmann::json spec = {{"gpus", 1}, {"command", "true"}};
    spec.update(c.extra);
    int status = 0;
    nlohmann::json answer = Submit(spec, &status);
    EXPECT_EQ(status, 400) << spec.dump();
    EXPECT_EQ(answer["error"].value("field", ""), c.field) << spec.dump() << " -> " << answer.dump();
  }
  EXPECT_EQ(Json(server_->Client(kAliceToken).Get("/v1/jobs"))["jobs"].size(), 0u);  // nothing was accepted
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
  spec.container.image = kImage;
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
  agent.Stop({"c1", 1, "n1", 0, "test over"});
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
