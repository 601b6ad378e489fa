// Container jobs stay inside their team's rights: never root without allow_root (not even
// in an image whose user is root), no capabilities, only allowed images, no host
// directories outside container_mount_roots, never "/" or "..".
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../server/container_fixture.h"

namespace gantry::testing {
namespace {

// The container fixture under a suite name of its own (its label is security).
class ContainerBoundaries : public Containers {};

TEST_F(ContainerBoundaries, AJobInAnImageRunsAsItsTeamsAccountWithoutCapabilities) {
  std::string id = Submit({{"gpus", 1},
                           {"container_image", kTestImage},
                           {"command", "id -u; grep CapEff /proc/self/status; touch /etc/owned || echo refused"}})
                       .value("id", "");
  ASSERT_EQ(WaitFor(id, "succeeded"), "succeeded") << Job(id).dump();
  EXPECT_EQ(Log(id), fmt::format("{}\nCapEff:\t0000000000000000\nrefused\n", getpwnam("nobody")->pw_uid));
}

TEST_F(ContainerBoundaries, ImagesAndMountsOutsideThePolicyAreRefusedNamingTheField) {
  struct Case {
    nlohmann::json extra;
    const char* field;
  } cases[] = {
      {{{"container_image", "localhost/gantry-test:1; rm -rf /"}}, "container_image"},
      {{{"container_image", "docker.io/library/ubuntu:24.04"}}, "container_image"},  // not an allowed image
      {{{"container_image", kTestImage}, {"container_mounts", {"/etc:/etc"}}}, "container_mounts[0]"},
      {{{"container_image", kTestImage}, {"container_mounts", {"/tmp/x:/x", "/:/host"}}}, "container_mounts[1]"},
      {{{"container_image", kTestImage}, {"container_mounts", {"/tmp/../etc:/x"}}}, "container_mounts[0]"},
      {{{"container_image", kTestImage}, {"container_pull", "sometimes"}}, "container_pull"},
      {{{"container_image", kTestImage}, {"container_env", {{"A", "two\nlines"}}}}, "container_env.A"},
      {{{"container_mounts", {"/tmp:/tmp"}}}, "container_image"},
      {{{"container_image", kTestImage}, {"container_runtime", "docker"}}, "container_runtime"},
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

// Before: `localhost/gantry-test:1@sha256:<another image's digest>` matched the allowed
// pattern 'localhost/gantry-test:*' and ran the other image.
TEST_F(ContainerBoundaries, ADigestRunsOnlyWhereThePolicyListsIt) {
  std::string digest = "sha256:" + std::string(64, 'a');
  int status = 0;
  nlohmann::json answer =
      Submit({{"gpus", 1}, {"command", "true"}, {"container_image", std::string(kTestImage) + "@" + digest}}, &status);
  EXPECT_EQ(status, 400) << answer.dump();
  EXPECT_EQ(answer["error"].value("field", ""), "container_image");
  EXPECT_NE(answer.dump().find("by digest"), std::string::npos) << answer.dump();
}

// Before: a bare job made /tmp/x -> / and a container job mounted /tmp/x: it listed the
// host's / (and /root/.config through another link).
TEST_F(ContainerBoundaries, AMountThroughALinkFailsTheStartNamingTheLink) {
  std::string link = TempPath("to-root");
  std::filesystem::remove(link);
  std::filesystem::create_symlink("/", link);
  std::string id = Submit({{"gpus", 1},
                           {"container_image", kTestImage},
                           {"container_mounts", {link + ":/host:ro"}},
                           {"command", "ls /host"}})
                       .value("id", "");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitFor(id, "failed"), "failed") << Job(id).dump();
  EXPECT_NE(Job(id).value("reason", "").find(link + " is a symbolic link"), std::string::npos) << Job(id).dump();
  EXPECT_EQ(Log(id).find("etc"), std::string::npos);  // nothing of / was listed
}

// Before: a directory under a 0700 parent was mounted for a job whose account cannot
// enter that parent outside a container.
TEST_F(ContainerBoundaries, AMountTheJobsAccountCannotReachFailsTheStart) {
  if (geteuid() != 0) GTEST_SKIP() << "jobs run as the test's own account when it is not root";
  std::string secret = TempPath("secret");
  std::filesystem::create_directories(secret + "/inner");
  std::filesystem::permissions(secret, std::filesystem::perms::owner_all);  // root's, 0700
  std::string id = Submit({{"gpus", 1},
                           {"container_image", kTestImage},
                           {"container_mounts", {secret + "/inner:/data:ro"}},
                           {"command", "ls /data"}})
                       .value("id", "");
  ASSERT_EQ(WaitFor(id, "failed"), "failed") << Job(id).dump();
  EXPECT_NE(Job(id).value("reason", "").find("not reachable by the job's account"), std::string::npos)
      << Job(id).dump();
}

// Before: an exec session ran the container runtime as root with the job's variables, so
// a job's PATH (into files it wrote itself) chose the "runtime" that root ran.
TEST_F(ContainerBoundaries, AnExecSessionRunsTheRuntimeWithoutTheJobsVariables) {
  namespace fs = std::filesystem;
  std::string trap = TempPath("exec-trap");
  fs::remove_all(trap);
  fs::create_directories(trap);
  for (const char* runtime : {"podman", "runc"}) {
    std::ofstream(trap + "/" + runtime) << "#!/bin/sh\ntouch " << trap << "/ran-as-$(id -u)\nexit 0\n";
    fs::permissions(trap + "/" + runtime, fs::perms::all);
  }
  std::string id = Submit({{"gpus", 1},
                           {"container_image", kTestImage},
                           {"env", {{"PATH", trap + ":/usr/local/bin:/usr/bin:/bin"}, {"TMPDIR", trap}}},
                           {"command", "exec busybox sleep 300"}})
                       .value("id", "");
  ASSERT_EQ(WaitFor(id, "running"), "running") << Job(id).dump();
  int rc = -1;
  std::string out = Cli("exec " + id + " -- busybox echo inside", kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("inside"), std::string::npos) << out;
  std::vector<std::string> ran;
  for (const auto& e : fs::directory_iterator(trap)) {
    if (e.path().filename().string().rfind("ran-as-", 0) == 0) ran.push_back(e.path().filename());
  }
  EXPECT_TRUE(ran.empty()) << "the job's PATH chose the runtime: " << ran.front();
  server_->Client(kAliceToken).Delete("/v1/jobs/" + id);
  WaitFor(id, "cancelled");
}

}  // namespace
}  // namespace gantry::testing
