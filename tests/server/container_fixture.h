// A standalone server whose jobs may run in containers (podman, the busybox image of
// tests/containers/make-test-image.sh), for the container tests; skipped where podman is
// not installed (the CI installs it).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "command_util.h"
#include "server_fixture.h"

namespace gantry::testing {

inline constexpr const char* kTestImage = "localhost/gantry-test:1";

// podman and the test image, or why the tests cannot run here.
inline std::string ContainerSetupProblem() {
  static const std::string problem = [] {
    std::string out;
    if (RunCommand("command -v podman 2>&1", &out) != 0) return std::string("podman is not installed");
    std::string script = std::string(GANTRY_SOURCE_DIR "/tests/containers/make-test-image.sh");
    if (RunCommand(fmt::format("bash {} {} 2>&1", script, kTestImage), &out) != 0)
      return "cannot make the image: " + out;
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

}  // namespace gantry::testing
