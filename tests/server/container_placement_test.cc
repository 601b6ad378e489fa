// A node whose container probe failed takes no container job: the job waits with the
// probe's error in its reason, other jobs run there, and the node's view says why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "server/controller_harness.h"
#include "server/server_process.h"

namespace gantry::testing {
namespace {

std::string StateOf(httplib::Client& c, const std::string& id) {
  return Json(c.Get("/v1/jobs/" + id)).value("state", "");
}

// Before: every container job was placed on such a node and failed 126 ("runc create
// failed: ... error setting rlimit type 6"), while the agent's start line said nothing was
// wrong.
TEST(ContainerPlacement, ANodeThatCannotRunContainersTakesNone) {
  std::string dir = TempPath("no-containers");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string runtime = dir + "/broken-podman";
  std::ofstream(runtime) << "#!/bin/sh\n"
                         << "[ \"$1\" = --version ] && { echo 'podman version 9.9.9'; exit 0; }\n"
                         << "echo 'Error: runc: runc create failed: error setting rlimit type 6: operation not "
                            "permitted' >&2\nexit 126\n";
  std::filesystem::permissions(runtime, std::filesystem::perms::owner_all);
  ServerProcess server(dir, "1x2xT4");
  server.AddArgs({"--container-runtime", runtime});
  server.Start();
  auto alice = server.Client(kAliceToken);
  auto r = alice.Post("/v1/jobs", R"({"gpus": 1, "container_image": "localhost/x:1", "command": "true"})",
                      "application/json");
  ASSERT_EQ(r->status, 201) << r->body;
  std::string id = Json(r)["id"];
  std::string bare = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "true"})", "application/json"))["id"];
  for (int i = 0; i < 200 && StateOf(alice, bare) != "succeeded"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(StateOf(alice, bare), "succeeded");
  EXPECT_EQ(StateOf(alice, id), "pending");
  std::string queue = alice.Get("/v1/queue")->body;
  EXPECT_NE(queue.find("cannot run containers (t4-0: a probe container failed (exit code 126): runc: runc create "
                       "failed: error setting rlimit type 6"),
            std::string::npos)
      << queue;
  nlohmann::json nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
  EXPECT_EQ(nodes["nodes"][0].value("containers", true), false) << nodes.dump();
  EXPECT_NE(nodes["nodes"][0].value("containers_problem", "").find("rlimit type 6"), std::string::npos);
  std::string log = ReadFileNoThrow(dir + "/server.log").value_or("");
  EXPECT_NE(log.find("container jobs are not placed on this node"), std::string::npos) << log;
}

}  // namespace
}  // namespace gantry::testing
