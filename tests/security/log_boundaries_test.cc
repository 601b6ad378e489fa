// Jobs' output on the controller's host: readable by no other account, written only by the
// node a run was placed on (a forged, wiped or pre-seeded log is dropped and audited), and
// held to its cap even when a job writes fast and exits between two trims.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "core/encoding.h"
#include "security/security_util.h"

namespace gantry::testing {
namespace {

nlohmann::json T4Registration(const std::string& node) {
  nlohmann::json gpus = {{{"index", 0}, {"uuid", "GPU-" + node}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}}};
  return {{"node_id", node}, {"inventory", {{"provider", "test"}, {"gpus", gpus}}}};
}

nlohmann::json LogReport(const std::string& node, const std::string& job, int64_t offset, const std::string& text) {
  return {{"node_id", node},
          {"logs",
           {{{"job_id", job},
             {"run", 1},
             {"rank", 0},
             {"stream", "stdout"},
             {"offset", offset},
             {"data", Base64Encode(text)}}}}};
}

class LogBoundaries : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("logs-cluster");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    server_->Start();
  }
  httplib::Client Agent(const std::string& node) {
    std::string token = AgentToken(node);
    return server_->Client(token.c_str());
  }
  void Register(const std::string& node) {
    auto r = Agent(node).Post("/v1/agent/register", T4Registration(node).dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  void Drain(const std::string& node, bool drain) {
    auto root = server_->Client(kRootToken);
    auto r = root.Post(fmt::format("/v1/nodes/{}/{}", node, drain ? "drain" : "undrain"), "{}", "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  std::string Logs(const std::string& id) {
    auto r = server_->Client(kAliceToken).Get("/v1/jobs/" + id + "/logs");
    return r && r->status == 200 ? r->body : "";
  }
  int Refusals(const std::string& user) {
    nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=200"));
    int n = 0;
    for (const auto& e : audit["audit"]) {
      n += e.value("user", "") == user && e.value("action", "").find("(logs)") != std::string::npos;
    }
    return n;
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

// Before: node-b's agent replaced the output of a job running on node-a ("gantry logs"
// showed only the forged line), cut it with a huge offset, and wrote the output of a job
// that did not exist yet; none of it was audited.
TEST_F(LogBoundaries, OnlyTheNodeARunIsPlacedOnWritesItsOutput) {
  Register("node-a");
  Register("node-b");
  Drain("node-b", true);
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "train"})", "application/json"))["id"];
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, id, "state"); }, "running"), "running");
  Drain("node-b", false);
  const std::string next = std::to_string(std::stoll(id) + 1);

  auto own =
      Agent("node-a").Post("/v1/agent/report", LogReport("node-a", id, 0, "real line\n").dump(), "application/json");
  ASSERT_EQ(own->status, 200);
  ASSERT_EQ(WaitUntil([&] { return Logs(id); }, "real line\n"), "real line\n");
  // Nor does node-a write another rank's output of its job (a gang's other member's).
  nlohmann::json other_rank = LogReport("node-a", id, 0, "not my rank\n");
  other_rank["logs"][0]["rank"] = 1;
  EXPECT_EQ(Agent("node-a").Post("/v1/agent/report", other_rank.dump(), "application/json")->status, 200);

  auto intruder = Agent("node-b");
  for (const nlohmann::json& forged :
       {LogReport("node-b", id, 0, "forged line\n"), LogReport("node-b", id, 100000000, "wiped\n"),
        LogReport("node-b", next, 0, "pre-seeded line\n")}) {
    auto r = intruder.Post("/v1/agent/report", forged.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);  // the report's other parts still count; its stray output does not
  }
  EXPECT_EQ(Logs(id), "real line\n");
  // Nor does a registration that claims node-a's run (as node-a's, or as exited) adopt or end
  // it: the run stays node-a's, running, and node-b's output for it is still dropped.
  nlohmann::json claim = T4Registration("node-b");
  claim["runs"] = {{{"job_id", id}, {"run", 1}, {"node_id", "node-a"}},
                   {{"job_id", id}, {"run", 1}, {"node_id", "node-a"}, {"exited", true}, {"exit_code", 0}}};
  ASSERT_EQ(intruder.Post("/v1/agent/register", claim.dump(), "application/json")->status, 200);
  EXPECT_EQ(JobField(alice, id, "state"), "running");
  EXPECT_EQ(intruder.Post("/v1/agent/report", LogReport("node-b", id, 0, "adopted line\n").dump(), "application/json")
                ->status,
            200);
  EXPECT_EQ(Logs(id), "real line\n");
  // The job that takes the pre-seeded id starts with an empty log.
  Drain("node-a", true);
  std::string later = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "eval"})", "application/json"))["id"];
  ASSERT_EQ(later, next);
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, later, "state"); }, "running"), "running");
  EXPECT_EQ(Logs(later), "");
  EXPECT_EQ(WaitUntil([&] { return std::to_string(Refusals("agent-node-b")); }, "4"), "4");
  EXPECT_EQ(WaitUntil([&] { return std::to_string(Refusals("agent-node-a")); }, "1"), "1");  // the other rank's
  EXPECT_EQ(alice.Get("/v1/jobs/" + id + "/logs?rank=1")->body, "");
}

// Before: logs/ was 0755 and its files 0644 under a 0711 data dir: a job of another team
// read `DATA_DIR/logs/ID/run-1/rank-0.stdout.log`, API keys included.
TEST_F(LogBoundaries, RemoteOutputIsTheServersAlone) {
  Register("node-a");
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "train"})", "application/json"))["id"];
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, id, "state"); }, "running"), "running");
  auto r = Agent("node-a").Post("/v1/agent/report", LogReport("node-a", id, 0, "WANDB_API_KEY=k-123\n").dump(),
                                "application/json");
  ASSERT_EQ(r->status, 200);
  ASSERT_EQ(WaitUntil([&] { return Logs(id); }, "WANDB_API_KEY=k-123\n"), "WANDB_API_KEY=k-123\n");
  struct stat st {};
  ASSERT_EQ(stat((server_->data_dir() + "/logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << std::oct << st.st_mode;
  // A server that an older version left with an open logs/ closes it at start.
  server_->Kill(SIGTERM);
  ASSERT_EQ(chmod((server_->data_dir() + "/logs").c_str(), 0755), 0);
  server_->Start();
  ASSERT_EQ(stat((server_->data_dir() + "/logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << std::oct << st.st_mode;
}

// Before: a job that wrote 6 MiB fast and exited kept all of it under a 1 MiB cap (the cap
// was applied once a second while the job ran).
TEST(LogCap, HoldsWhenAJobWritesFastAndExits) {
  std::string dir = TempPath("log-cap");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "1x1xT4");
  server.AddArgs({"--max-log-mb", "1"});
  server.Start();
  auto alice = server.Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "seq -f '%063g' 1 98304; echo the-end"})",
                                   "application/json"))["id"];
  ASSERT_EQ(WaitUntil([&] { return JobField(alice, id, "state"); }, "succeeded"), "succeeded");
  std::string log = server.data_dir() + "/agent/jobs/" + id + "/run-1/rank-0.stdout.log";
  EXPECT_LE(std::filesystem::file_size(log), 1u << 20);
  auto r = alice.Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.substr(r->body.size() - 8), "the-end\n");
}

}  // namespace
}  // namespace gantry::testing
