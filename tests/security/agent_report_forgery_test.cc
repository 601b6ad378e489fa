// A compromised agent's reports about jobs that run on another node. Before: an exit report
// for another node's job by another spelling of its id ("01") left a stray index entry, which
// ended a sanitized server (and leaked memory in a release one) from one request, on a
// registration's run list too; a failed-MIG report marked any job as faulted, so it requeued
// (and ran and was billed again) after exiting 0; a "started" report added events to any
// job; and a log chunk at offset INT64_MAX overflowed a sum. Now each names only runs on the
// reporting node's own GPUs, by the job's stored id.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "security/security_util.h"

namespace gantry::testing {
namespace {

nlohmann::json Registration(const std::string& node, nlohmann::json runs = nlohmann::json::array()) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    gpus.push_back(
        {{"index", i}, {"uuid", fmt::format("GPU-{}-{}", node, i)}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}});
  }
  return {{"node_id", node}, {"inventory", {{"provider", "test"}, {"gpus", gpus}}}, {"runs", runs}};
}

class ReportForgery : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = TempPath("forgery");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir, "");
    server_->Start();
  }
  httplib::Client Agent(const std::string& node) { return server_->Client(AgentToken(node).c_str()); }
  int Post(const std::string& node, const std::string& path, const nlohmann::json& body) {
    auto r = Agent(node).Post(path, body.dump(), "application/json");
    return r ? r->status : 0;
  }
  int Report(const std::string& node, const nlohmann::json& events, const nlohmann::json& logs = nullptr) {
    nlohmann::json body = {{"node_id", node}, {"events", events}};
    if (!logs.is_null()) body["logs"] = logs;
    return Post(node, "/v1/agent/report", body);
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ReportForgery, ReportsAboutAnotherNodesJobChangeNothing) {
  ASSERT_EQ(Post("node-a", "/v1/agent/register", Registration("node-a")), 200);
  auto alice = server_->Client(kAliceToken);
  auto job = alice.Post("/v1/jobs", R"({"gpus": 2, "command": "train"})", "application/json");
  const std::string id = Json(job).value("id", "");
  ASSERT_EQ(Json(job)["state"], "running") << job->body;  // on node-a, the only node
  ASSERT_EQ(Post("node-b", "/v1/agent/register", Registration("node-b")), 200);

  // node-b: the job exited (by two spellings of its id, in a report and a registration),
  // started, and failed a MIG change on its GPU.
  EXPECT_EQ(Report("node-b", {{{"type", "exited"}, {"job_id", "0" + id}, {"run", 1}, {"exit_code", 0}}}), 200);
  EXPECT_EQ(Post("node-b", "/v1/agent/register",
                 Registration("node-b", {{{"job_id", "00" + id}, {"run", 1}, {"exited", true}, {"exit_code", 1}}})),
            200);
  EXPECT_EQ(Report("node-b", {{{"type", "started"}, {"job_id", id}, {"run", 1}}}), 200);
  EXPECT_EQ(
      Report(
          "node-b",
          {{{"type", "mig"}, {"gpu", 0}, {"job_id", id}, {"error", "forged"}, {"devices", nlohmann::json::array()}}}),
      200);
  // node-a's own log chunk at the largest offset there is.
  EXPECT_EQ(Report("node-a", nlohmann::json::array(),
                   {{{"job_id", id},
                     {"run", 1},
                     {"rank", 0},
                     {"stream", "stdout"},
                     {"offset", std::numeric_limits<int64_t>::max()},
                     {"data", "eA=="}}}),
            200);

  // The server is up, the job runs on, and no event names node-b.
  ASSERT_EQ(JobField(alice, id, "state"), "running");
  auto events = Json(alice.Get("/v1/jobs/" + id + "/events"));
  for (const auto& e : events["events"]) EXPECT_EQ(e.dump().find("node-b"), std::string::npos) << e.dump();
  // Its own node ends it: it succeeded (not requeued after a "fault").
  EXPECT_EQ(Report("node-a", {{{"type", "exited"}, {"job_id", id}, {"run", 1}, {"exit_code", 0}}}), 200);
  for (int i = 0; i < 50 && JobField(alice, id, "state") == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(JobField(alice, id, "state"), "succeeded");
  EXPECT_EQ(Json(alice.Get("/v1/jobs/" + id)).value("runs", 0), 1);
}

}  // namespace
}  // namespace gantry::testing
