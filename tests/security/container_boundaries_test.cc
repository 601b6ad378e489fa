// Container jobs stay inside their team's rights: never root without allow_root (not even
// in an image whose user is root), no capabilities, only allowed images, no host
// directories outside container_mount_roots, never "/" or "..".
#include <pwd.h>

#include "../server/container_fixture.h"

namespace gantry::testing {
namespace {

TEST_F(Containers, AJobInAnImageRunsAsItsTeamsAccountWithoutCapabilities) {
  std::string id = Submit({{"gpus", 1},
                           {"container_image", kTestImage},
                           {"command", "id -u; grep CapEff /proc/self/status; touch /etc/owned || echo refused"}})
                       .value("id", "");
  ASSERT_EQ(WaitFor(id, "succeeded"), "succeeded") << Job(id).dump();
  EXPECT_EQ(Log(id), fmt::format("{}\nCapEff:\t0000000000000000\nrefused\n", getpwnam("nobody")->pw_uid));
}

TEST_F(Containers, ImagesAndMountsOutsideThePolicyAreRefusedNamingTheField) {
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

}  // namespace
}  // namespace gantry::testing
