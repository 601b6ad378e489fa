// The container command line a start order becomes: a CDI device per GPU (a MIG slice by
// its MIG UUID) only when a CDI spec names it, the job's account and limits, the
// variables in a 0600 file and never on the command line.
#include "agent/container_launch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/mount_check.h"
#include "core/read_file.h"

namespace gantry {
namespace {

class ContainerLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "container-launch-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/cdi");
    std::filesystem::create_directories(dir_ + "/run");
    std::filesystem::create_directories(dir_ + "/imagenet");  // a mount's host path, open to the job's account
    runtime_.cdi_dirs = {dir_ + "/cdi"};
    JobSpec spec;
    spec.command = "python train.py";
    spec.container.image = "nvcr.io/nvidia/pytorch:24.05-py3";
    spec.container.mounts = {dir_ + "/imagenet:/data:ro"};
    spec.container.env = {{"WANDB_API_KEY", "secret-value"}};
    order_.job_id = "7";
    order_.run = 2;
    order_.node_id = "n1";
    order_.spec = std::make_shared<const JobSpec>(spec);
    order_.memory_mib = 2048;
    order_.cpus = 4;
    order_.gpus = {{0, "GPU-aaa", "", 1000, 0, 0, "", -1}, {1, "GPU-bbb", "MIG-ccc", 143, 0, 0, "1g.10gb", 0}};
  }
  void TearDown() override {
    ReleaseStagedMounts(StagedMountsDir(dir_ + "/run"));
    std::filesystem::remove_all(dir_);
  }
  ContainerJob Job() {
    return ContainerJob{&order_, {{"GANTRY_JOB_ID", "7"}}, dir_ + "/run", "/ckpt/7", 1000, 1000, {1000, 44}, false, ""};
  }
  bool Has(const std::vector<std::string>& argv, const std::string& a, const std::string& b) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == a && argv[i + 1] == b) return true;
    }
    return false;
  }
  std::string dir_;
  ContainerRuntime runtime_;
  StartOrder order_;
};

TEST_F(ContainerLaunchTest, AGpuWithoutACdiSpecFailsTheStartNamingIt) {
  std::ofstream(dir_ + "/cdi/nvidia.yaml") << "devices:\n- name: GPU-aaa\n";  // MIG-ccc is not there
  auto launch = PrepareContainer(runtime_, Job());
  ASSERT_FALSE(launch.ok());
  EXPECT_NE(launch.status().message().find("names GPU MIG-ccc"), std::string::npos) << launch.status().ToString();
  EXPECT_NE(launch.status().message().find("nvidia-ctk cdi generate"), std::string::npos);
}

TEST_F(ContainerLaunchTest, TheCommandLineCarriesDevicesAccountLimitsAndMounts) {
  std::ofstream(dir_ + "/cdi/nvidia.yaml") << "devices:\n- name: GPU-aaa\n- name: MIG-ccc\n";
  auto launch = PrepareContainer(runtime_, Job());
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  const std::vector<std::string>& a = launch->argv;
  EXPECT_EQ(a[0], "podman");
  EXPECT_TRUE(Has(a, "--device", "nvidia.com/gpu=GPU-aaa"));
  EXPECT_TRUE(Has(a, "--device", "nvidia.com/gpu=MIG-ccc"));  // the slice, not its whole GPU
  EXPECT_FALSE(Has(a, "--device", "nvidia.com/gpu=GPU-bbb"));
  EXPECT_TRUE(Has(a, "--user", "1000:1000"));
  EXPECT_TRUE(Has(a, "--cap-drop", "all"));
  EXPECT_TRUE(Has(a, "--group-add", "44"));  // its supplementary groups, as on the node
  EXPECT_FALSE(Has(a, "--group-add", "1000"));
  EXPECT_TRUE(Has(a, "--network", "host"));
  EXPECT_TRUE(Has(a, "--memory", "2048m"));
  EXPECT_TRUE(Has(a, "--cpus", "4"));
  // As root the runtime mounts the checked directory staged under the run's directory;
  // else the path as checked.
  const std::string source = ::geteuid() == 0 ? StagedMountsDir(dir_ + "/run") + "/0" : dir_ + "/imagenet";
  EXPECT_TRUE(Has(a, "-v", source + ":/data:ro"));
  EXPECT_TRUE(Has(a, "-v", "/ckpt/7:/ckpt/7:rw"));
  EXPECT_EQ(std::vector<std::string>(a.end() - 4, a.end()),
            (std::vector<std::string>{"nvcr.io/nvidia/pytorch:24.05-py3", "/bin/sh", "-c", "python train.py"}));
  EXPECT_EQ(launch->name.rfind("gantry-7-2-n1-", 0), 0u);
  // The variables are in the agent's 0600 file, never on the command line.
  for (const std::string& arg : a) EXPECT_EQ(arg.find("secret-value"), std::string::npos) << arg;
  struct stat st {};
  ASSERT_EQ(stat(launch->env_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string env = ReadFileNoThrow(launch->env_file).value_or("");
  EXPECT_NE(env.find("WANDB_API_KEY=secret-value\n"), std::string::npos);
  EXPECT_NE(env.find("GANTRY_JOB_ID=7\n"), std::string::npos);
}

TEST_F(ContainerLaunchTest, AnMpsClientGetsThePipeDirectoryAndTheHostsIpc) {
  runtime_.gpu_devices = false;
  ContainerJob job = Job();
  job.mps_pipe_dir = "/var/lib/gantry/mps/GPU-aaa/pipe";
  auto launch = PrepareContainer(runtime_, job);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_TRUE(Has(launch->argv, "-v", "/var/lib/gantry/mps/GPU-aaa/pipe:/var/lib/gantry/mps/GPU-aaa/pipe"));
  EXPECT_TRUE(Has(launch->argv, "--ipc", "host"));
}

TEST_F(ContainerLaunchTest, FakeGpusPassNoDevicesAndRootJobsKeepTheirCapabilities) {
  runtime_.gpu_devices = false;
  ContainerJob job = Job();
  job.as_root = true;
  auto launch = PrepareContainer(runtime_, job);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(std::count(launch->argv.begin(), launch->argv.end(), "--device"), 0);
  EXPECT_EQ(std::count(launch->argv.begin(), launch->argv.end(), "--user"), 0);
  EXPECT_NE(ContainerName("7", 2, "n1", "/a"), ContainerName("7", 2, "n1", "/b"));  // two agents, one host
}

}  // namespace
}  // namespace gantry
