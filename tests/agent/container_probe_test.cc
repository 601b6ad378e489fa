// The agent's container probe against stand-in runtimes: one whose defaults fail the way
// runc does in a nested sandbox (the probe finds the limits that work and keeps them), one
// that never runs a container (the node says why), and one that is not there at all.
#include "agent/container_probe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

// A stand-in for podman: --version and info answer; `run` fails as runc does unless
// `needs` is among its arguments (empty: never runs), else runs what follows --rootfs DIR.
std::string FakeRuntime(const std::string& dir, const std::string& needs) {
  std::filesystem::create_directories(dir);
  std::string path = dir + "/fake-podman";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "case \"$1\" in\n"
                      << "  --version) echo 'podman version 9.9.9'; exit 0 ;;\n"
                      << "  info) echo 'runc, cgroups v2 (systemd)'; exit 0 ;;\n"
                      << "esac\n"
                      << "needs='" << needs << "'\n"
                      << "ok=no\n"
                      << "for a in \"$@\"; do [ -n \"$needs\" ] && [ \"$a\" = \"$needs\" ] && ok=yes; done\n"
                      << "if [ $ok = no ]; then\n"
                      << "  echo 'Error: runc: runc create failed: unable to start container process: error during "
                         "container init: error setting rlimits for ready process: error setting rlimit type 6: "
                         "operation not permitted: OCI permission denied' >&2\n"
                      << "  exit 126\n"
                      << "fi\n"
                      << "while [ $# -gt 0 ] && [ \"$1\" != --rootfs ]; do shift; done\n"
                      << "shift 2; exec \"$@\"\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(ContainerProbe, FindsTheLimitsThatWorkWhereTheDefaultsFail) {
  std::string dir = TempPath("probe");
  ContainerRuntime rt;
  rt.command = FakeRuntime(dir, "nproc=4096:4096");
  ContainerProbe probe = ProbeContainerRuntime(rt, dir);
  EXPECT_TRUE(probe.works) << probe.problem;
  EXPECT_EQ(probe.extra_run_options, (std::vector<std::string>{"--ulimit", "nproc=4096:4096"}));
  EXPECT_EQ(probe.Line(),
            "containers: podman version 9.9.9 with runc, cgroups v2 (systemd) (a probe container ran with --ulimit "
            "nproc=4096:4096)");
  EXPECT_FALSE(std::filesystem::exists(dir + "/container-probe"));  // its root tree is gone
}

TEST(ContainerProbe, RunsWithTheDefaultsWhereTheyWork) {
  std::string dir = TempPath("probe");
  ContainerRuntime rt;
  rt.command = FakeRuntime(dir, "--rm");
  ContainerProbe probe = ProbeContainerRuntime(rt, dir);
  EXPECT_TRUE(probe.works) << probe.problem;
  EXPECT_TRUE(probe.extra_run_options.empty());
}

TEST(ContainerProbe, SaysWhyWhenNoContainerRuns) {
  std::string dir = TempPath("probe");
  ContainerRuntime rt;
  rt.command = FakeRuntime(dir, "");
  ContainerProbe probe = ProbeContainerRuntime(rt, dir);
  EXPECT_FALSE(probe.works);
  EXPECT_NE(probe.problem.find("a probe container failed (exit code 126)"), std::string::npos) << probe.problem;
  EXPECT_NE(probe.problem.find("error setting rlimit type 6: operation not permitted"), std::string::npos)
      << probe.problem;
  EXPECT_NE(probe.Line().find("container jobs are not placed on this node"), std::string::npos);
}

TEST(ContainerProbe, ARuntimeThatIsNotThereRunsNothing) {
  ContainerRuntime rt;
  rt.command = "/nonexistent/podman";
  ContainerProbe probe = ProbeContainerRuntime(rt, TempPath("probe"));
  EXPECT_FALSE(probe.works);
  EXPECT_NE(probe.problem.find("does not run here"), std::string::npos) << probe.problem;
}

}  // namespace
}  // namespace gantry::testing
