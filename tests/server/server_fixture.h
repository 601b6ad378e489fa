// A test fixture with the real standalone server on loopback (fake GPUs), plus helpers
// to wait for a job's state and to run the CLI against it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "command_util.h"
#include "controller_harness.h"
#include "server_process.h"

namespace gantry::testing {

// The id in the CLI's "submitted job 7 (...)" or "gantry: job 7 submitted" line.
inline std::string JobIdIn(const std::string& out) {
  size_t at = out.find("job ") + 4;
  return out.substr(at, out.find(' ', at) - at);
}

// The JSON object in a command's output (`-o json`), after any line before it.
inline nlohmann::json JsonIn(const std::string& out) { return nlohmann::json::parse(out.substr(out.find('{'))); }

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = TempPath("srv");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir);
    server_->WriteUsers(Teams());
    server_->Start();
  }
  // The `teams:` section of the server's users.yaml.
  virtual std::string Teams() const { return kTestTeams; }
  // Polls a job until it reaches `state` (or 10 s pass); returns the last state seen.
  std::string WaitFor(const std::string& id, const std::string& state, const char* token = kAliceToken) {
    auto c = server_->Client(token);
    std::string seen;
    for (int i = 0; i < 500 && seen != state; ++i) {
      seen = Json(c.Get("/v1/jobs/" + id)).value("state", "");
      if (seen != state) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return seen;
  }
  // Runs the CLI from /tmp: it gives its directory to jobs as their working directory, and
  // the checkout's (below /root on a fresh machine) is not one a job's account may enter.
  std::string Cli(const std::string& args, const char* token = kAliceToken, int* rc = nullptr) {
    std::string out;
    int status = RunCommand(fmt::format("cd /tmp && GANTRY_SERVER={} GANTRY_TOKEN={} {} {} 2>&1", server_->address(),
                                        token, GANTRY_BINARY, args),
                            &out);
    if (rc) *rc = status;
    return out;
  }
  std::unique_ptr<ServerProcess> server_;
};

// A cluster server with one remote agent (node-a, two T4s) up: for what goes through an
// agent's own connection to the server.
class RemoteAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("remote");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    std::filesystem::permissions(dir_, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    server_->Start();
    agent_ = std::make_unique<AgentProcess>(dir_, "node-a", "2xT4");
    agent_->Start(server_->address());
    for (int i = 0; i < 500; ++i) {
      nlohmann::json nodes = Json(server_->Client(kRootToken).Get("/v1/nodes"));
      if (nodes.contains("nodes") && !nodes["nodes"].empty() && nodes["nodes"][0]["state"] == "up") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AgentProcess> agent_;
};

}  // namespace gantry::testing
