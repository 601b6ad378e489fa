// Per-job cgroups: the setup, limits and OOM accounting against a directory laid out like
// cgroupfs (this machine's kernel has no cgroup v2 controllers), a job whose shim joins
// its cgroup before the command runs, and, where the kernel allows, a real memory limit.
#include "agent/cgroups.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/local_agent.h"
#include "agent/report_sink.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A fake cgroup2 mount with the agent in /svc and the cpu and memory controllers there.
std::string FakeMount() {
  std::string mount = TempPath("cgroupfs");
  std::filesystem::remove_all(mount);
  std::filesystem::create_directories(mount + "/svc");
  std::ofstream(mount + "/svc/cgroup.controllers") << "cpuset cpu io memory pids\n";
  std::ofstream(mount + "/svc/cgroup.subtree_control") << "";
  std::ofstream(mount + "/svc/cgroup.procs") << "12345\n";  // a helper of the service, moved out
  return mount;
}

TEST(JobCgroups, SetsUpALeafForTheAgentAndLimitsEachJob) {
  std::string mount = FakeMount();
  std::string why;
  auto cg = JobCgroups::Open(mount, "0::/svc\n", &why);
  ASSERT_NE(cg, nullptr) << why;
  EXPECT_EQ(Read(mount + "/svc/agent/cgroup.procs"), "12345");
  EXPECT_EQ(Read(mount + "/svc/cgroup.subtree_control"), "+cpu +memory");
  EXPECT_EQ(Read(mount + "/svc/jobs/cgroup.subtree_control"), "+cpu +memory");
  auto procs = cg->Create("7-1-n1", 2, 512);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  EXPECT_EQ(*procs, mount + "/svc/jobs/7-1-n1/cgroup.procs");
  EXPECT_EQ(Read(mount + "/svc/jobs/7-1-n1/cpu.max"), "200000 100000");
  EXPECT_EQ(Read(mount + "/svc/jobs/7-1-n1/memory.max"), "536870912");
  EXPECT_EQ(Read(mount + "/svc/jobs/7-1-n1/memory.swap.max"), "0");
  ASSERT_TRUE(cg->Create("8-1-n1", 0, 0).ok());
  EXPECT_EQ(Read(mount + "/svc/jobs/8-1-n1/cpu.max"), "max");
  EXPECT_EQ(Read(mount + "/svc/jobs/8-1-n1/memory.max"), "max");
  EXPECT_EQ(cg->OomKills("7-1-n1"), 0);
  std::ofstream(mount + "/svc/jobs/7-1-n1/memory.events") << "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n";
  EXPECT_EQ(cg->OomKills("7-1-n1"), 1);
}

TEST(JobCgroups, SaysWhyAMachineDoesNotAllowThem) {
  std::string mount = FakeMount();
  std::string why;
  EXPECT_EQ(JobCgroups::Open(mount, "1:cpu:/\n0::/\n", &why), nullptr);  // v1 with an empty v2
  EXPECT_NE(why.find("cpu and memory controllers do not reach"), std::string::npos) << why;
  EXPECT_EQ(JobCgroups::Open("", "4:memory:/x\n", &why), nullptr);
  EXPECT_EQ(why, "no cgroup v2 (unified) hierarchy");
  // auto mode leaves a cgroup it shares (a login session's) alone; the helper in /svc counts.
  EXPECT_EQ(JobCgroups::Open(mount, "0::/svc\n", &why, /*only_if_alone=*/true), nullptr);
  EXPECT_NE(why.find("shares " + mount + "/svc with other processes"), std::string::npos) << why;
  EXPECT_EQ(Read(mount + "/svc/cgroup.subtree_control"), "");  // nothing was touched
  std::string note, error;
  EXPECT_EQ(JobCgroups::ForMode("off", &note, &error), nullptr);
  EXPECT_NE(note.find("host memory is watched"), std::string::npos);
  EXPECT_EQ(JobCgroups::ForMode("sometimes", &note, &error), nullptr);
  EXPECT_NE(error.find("expected auto, required or off"), std::string::npos);
}

StartOrder Job(const std::string& id, const std::string& command, int64_t memory_mib) {
  JobSpec spec = MakeJob(id).spec();
  spec.command = command;
  StartOrder o;
  o.job_id = id;
  o.spec = std::make_shared<const JobSpec>(spec);
  o.node_id = "n1";
  o.leader_node = "n1";
  o.cpus = 1;
  o.memory_mib = memory_mib;
  RunAsThisAccount(o);
  return o;
}

std::unique_ptr<LocalAgent> StartAgent(const std::string& name, JobCgroups* cg, ReportSink& exits) {
  std::string dir = TempPath(name);
  std::filesystem::remove_all(dir);
  auto agent = std::make_unique<LocalAgent>(
      LocalAgentOptions{.state_dir = dir, .shim = GANTRY_BINARY, .poll_ms = 20, .cgroups = cg}, exits);
  agent->Serve();
  return agent;
}

TEST(JobCgroups, TheJobsShimJoinsItsCgroupAndAnOomKillIsNamed) {
  std::string mount = FakeMount();
  std::string why;
  auto cg = JobCgroups::Open(mount, "0::/svc\n", &why);
  ASSERT_NE(cg, nullptr) << why;
  ReportSink exits;
  auto agent = StartAgent("agent", cg.get(), exits);
  // cgroupfs makes a cgroup's files with it; here the test does.
  std::filesystem::create_directories(mount + "/svc/jobs/j1-1-n1");
  std::ofstream(mount + "/svc/jobs/j1-1-n1/cgroup.procs") << "";
  // The job plays the kernel: it records an OOM kill in its cgroup and dies of SIGKILL.
  std::string events = mount + "/svc/jobs/j1-1-n1/memory.events";
  agent->Start(Job("j1", "printf 'oom 1\\noom_kill 1\\n' > " + events + "; kill -9 $$", 200));
  int code = exits.WaitExit("j1");
  std::string reason = exits.Reason("j1");
  EXPECT_EQ(code, 137);
  EXPECT_EQ(reason, "killed by the kernel: over its memory limit of 200 MiB (memory_gb)");
  EXPECT_EQ(Read(mount + "/svc/jobs/j1-1-n1/cgroup.procs"), "0");  // the shim joined before exec
  EXPECT_EQ(Read(mount + "/svc/jobs/j1-1-n1/memory.max"), std::to_string(200 * 1024 * 1024));
  EXPECT_EQ(Read(mount + "/svc/jobs/j1-1-n1/cpu.max"), "100000 100000");
}

// Where the kernel gives this (root) process cgroup v2 with cpu and memory and the process
// is alone in its cgroup (as an agent in its own service or container is), a job over its
// memory is killed by the kernel and the agent says so.
TEST(JobCgroups, TheKernelEnforcesTheMemoryLimit) {
  std::string note, error;
  std::unique_ptr<JobCgroups> cg = JobCgroups::ForMode("auto", &note, &error);
  if (!cg) GTEST_SKIP() << note;
  ReportSink exits;
  auto agent = StartAgent("agent-real", cg.get(), exits);
  agent->Start(Job("hog", "head -c 800M /dev/zero | tail", 100));
  int code = exits.WaitExit("hog");
  std::string reason = exits.Reason("hog");
  EXPECT_NE(code, 0);
  EXPECT_EQ(reason, "killed by the kernel: over its memory limit of 100 MiB (memory_gb)");
}

}  // namespace
}  // namespace gantry::testing
