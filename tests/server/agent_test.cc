// Integration: a cluster server with remote `gantry agent` processes on loopback. Jobs run
// on the agent's node; a killed agent's jobs survive its restart; a node that stops
// sending heartbeats is lost and its jobs requeue.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "controller_harness.h"
#include "server_process.h"

namespace gantry::testing {
namespace {

class Agents : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("cluster");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    // Jobs run as `nobody` on a root agent: they signal through files in this directory.
    std::filesystem::permissions(dir_, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    // Long enough for a killed agent to start again and register on a loaded machine (a
    // sanitized build beside others; its start runs a probe container): the restart test is
    // about adoption, not the timeout. Short enough for the lost-node test's 15 s wait.
    server_->AddArgs({"--node-timeout", "8"});
    server_->Start();
    agent_ = std::make_unique<AgentProcess>(dir_, "node-a", "4xT4");
    agent_->Start(server_->address());
    ASSERT_EQ(Wait([&] { return NodeState("node-a"); }, "up"), "up");
  }
  std::string NodeState(const std::string& id) {
    nlohmann::json nodes = Json(Root().Get("/v1/nodes"));  // kept: the loop must not outlive it
    for (const auto& n : nodes["nodes"]) {
      if (n["id"] == id) return n["state"];
    }
    return "";
  }
  std::string JobState(const std::string& id) { return Json(Root().Get("/v1/jobs/" + id)).value("state", ""); }
  httplib::Client Root() { return server_->Client(kRootToken); }
  // Polls `f` until it returns `want` (or 15 s pass); returns the last value.
  template <typename F>
  std::string Wait(F f, const std::string& want) {
    std::string seen;
    for (int i = 0; i < 750 && (seen = f()) != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return seen;
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(Agents, AgentTokensUseOnlyTheAgentEndpoints) {
  EXPECT_EQ(server_->Client(kAgentToken).Get("/v1/jobs")->status, 403);
  EXPECT_EQ(server_->Client(kAliceToken).Post("/v1/agent/register", "{}", "application/json")->status, 403);
  nlohmann::json gpus = Json(Root().Get("/v1/nodes/node-a/gpus"));
  ASSERT_EQ(gpus["gpus"].size(), 4u);
  EXPECT_EQ(gpus["gpus"][0]["type"], "T4");
}

TEST_F(Agents, ARemoteJobsOutputIsServedByTheServer) {
  auto alice = server_->Client(kAliceToken);
  std::string body = R"({"gpus": 1, "command": "for i in 1 2 3; do echo line $i; done; echo oops >&2"})";
  std::string id = Json(alice.Post("/v1/jobs", body, "application/json"))["id"];
  ASSERT_EQ(Wait([&] { return JobState(id); }, "succeeded"), "succeeded");
  auto out = [&](const std::string& stream) { return alice.Get("/v1/jobs/" + id + "/logs?stream=" + stream)->body; };
  EXPECT_EQ(Wait([&] { return out("stdout"); }, "line 1\nline 2\nline 3\n"), "line 1\nline 2\nline 3\n");
  EXPECT_EQ(Wait([&] { return out("stderr"); }, "oops\n"), "oops\n");
  EXPECT_EQ(server_->Client(kBobToken).Get("/v1/jobs/" + id + "/logs")->status, 404);  // another team's
}

TEST_F(Agents, AKilledAgentsJobSurvivesItsRestart) {
  std::string go = dir_ + "/go", up = dir_ + "/up";
  std::string body =
      fmt::format(R"({{"gpus": 2, "command": "touch {}; while [ ! -e {} ]; do sleep 0.05; done; exit 0"}})", up, go);
  std::string id = Json(server_->Client(kAliceToken).Post("/v1/jobs", body, "application/json"))["id"];
  ASSERT_EQ(Wait([&] { return std::filesystem::exists(up) ? std::string("up") : ""; }, "up"), "up");
  agent_->Kill(SIGKILL);
  agent_->Start(server_->address());  // within the node timeout
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::ofstream(go) << "go\n";
  EXPECT_EQ(Wait([&] { return JobState(id); }, "succeeded"), "succeeded");
  nlohmann::json job = Json(Root().Get("/v1/jobs/" + id));
  EXPECT_EQ(job["runs"], 1);  // adopted, not started again
  EXPECT_EQ(job["exit_code"], 0);
}

TEST_F(Agents, ASilentNodeIsLostAndItsJobRequeues) {
  std::string id = Json(
      server_->Client(kAliceToken).Post("/v1/jobs", R"({"gpus": 4, "command": "sleep 30"})", "application/json"))["id"];
  ASSERT_EQ(Wait([&] { return JobState(id); }, "running"), "running");
  agent_->Kill(SIGKILL);
  EXPECT_EQ(Wait([&] { return NodeState("node-a"); }, "down"), "down");
  EXPECT_EQ(Wait([&] { return JobState(id); }, "pending"), "pending");
  nlohmann::json job = Json(Root().Get("/v1/jobs/" + id));
  EXPECT_NE(job["reason"].get<std::string>().find("lost"), std::string::npos) << job.dump();
  // The node comes back: the job starts again there (a new run; the old one is stopped).
  agent_->Start(server_->address());
  EXPECT_EQ(Wait([&] { return JobState(id); }, "running"), "running");
  EXPECT_EQ(Json(Root().Get("/v1/jobs/" + id))["runs"], 2);
  nlohmann::json history = Json(Root().Get("/v1/nodes/node-a/events"));
  bool lost = false;
  for (const auto& e : history["events"]) lost = lost || e["kind"] == "lost";
  EXPECT_TRUE(lost);
}

// A malformed agent report or registration is refused naming the element at fault, and
// nothing of it is applied: the good event before the bad one does not end the job.
TEST_F(Agents, AMalformedReportIsRefusedWholeNamingTheElement) {
  std::string go = dir_ + "/go-malformed";
  std::string body = fmt::format(R"({{"gpus": 1, "command": "while [ ! -e {} ]; do sleep 0.05; done"}})", go);
  std::string id = Json(server_->Client(kAliceToken).Post("/v1/jobs", body, "application/json"))["id"];
  ASSERT_EQ(Wait([&] { return JobState(id); }, "running"), "running");
  auto agent = server_->Client(kAgentToken);
  nlohmann::json report = {
      {"node_id", "node-a"},
      {"events",
       {{{"type", "exited"}, {"job_id", id}, {"run", 1}, {"exit_code", 0}}, {{"type", "exited"}, {"run", "one"}}}}};
  auto r = agent.Post("/v1/agent/report", report.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "events[1]") << r->body;
  report = {{"node_id", "node-a"}, {"telemetry", {{{"gpu", 0}, {"sample", {{"procs", {7}}}}}}}};
  r = agent.Post("/v1/agent/report", report.dump(), "application/json");
  EXPECT_EQ(Json(r)["error"]["field"], "telemetry[0]") << r->body;
  EXPECT_NE(Json(r)["error"]["message"].get<std::string>().find("sample.procs[0]: must be an object"),
            std::string::npos)
      << r->body;
  nlohmann::json reg = {{"node_id", "node-a"}, {"inventory", {{"gpus", {{{"index", "zero"}}}}}}};
  r = agent.Post("/v1/agent/register", reg.dump(), "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json(r)["error"]["field"], "inventory.gpus[0]") << r->body;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(JobState(id), "running");  // the good first event was not applied
  std::ofstream(go) << "go\n";
  EXPECT_EQ(Wait([&] { return JobState(id); }, "succeeded"), "succeeded");
}

// A remote agent on a MIG GPU makes the instance the scheduler planned, and the server
// learns its device UUID from the agent's report.
TEST(RemoteMig, TheAgentMakesTheInstanceAndTheServerLearnsItsUuid) {
  std::string dir = TempPath("cluster-mig");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  server.Start();
  AgentProcess agent(dir, "node-m", "1xH100-80GB:mig");
  agent.Start(server.address());
  auto alice = server.Client(kAliceToken);
  auto root = server.Client(kRootToken);
  std::string id;
  for (int i = 0; i < 250 && id.empty(); ++i) {  // the node registers first
    auto r = alice.Post("/v1/jobs", R"({"mig_profile": "2g.20gb", "command": "echo $CUDA_VISIBLE_DEVICES"})",
                        "application/json");
    if (r && r->status == 201) id = Json(r)["id"];
    if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(id.empty());
  std::string out;
  for (int i = 0; i < 500 && out.empty(); ++i) {
    auto r = alice.Get("/v1/jobs/" + id + "/logs");
    out = r && r->status == 200 ? r->body : "";
    if (out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(out.rfind("MIG-fake-GPU-fake-node-m-0-", 0), 0u) << out;
  std::string uuid;
  for (int i = 0; i < 250 && uuid.empty(); ++i) {
    nlohmann::json nodes = Json(root.Get("/v1/nodes"));
    for (const auto& n : nodes["nodes"]) {
      for (const auto& m : n["gpus"][0]["mig_instances"]) uuid = m.value("uuid", "");
    }
    if (uuid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(uuid + "\n", out);
}

}  // namespace
}  // namespace gantry::testing
