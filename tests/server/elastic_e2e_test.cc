// End to end on the fake cloud (scripts/fake-cloud.sh): a burst of jobs grows a spot pool
// from its minimum, critical work gets an on-demand node, a spot reclaim moves a
// checkpointing job to another node where it resumes, and the pools shrink back to their
// minimum. The real server, real agents started by the scale-up hook, real jobs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "elastic_cluster.h"

namespace gantry::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The pools: spot (min 1, max 3) and on-demand (min 0, max 2), 2 A100s per node.
std::string PoolsYaml(const ElasticCluster& c) {
  std::string pools =
      "autoscaler: {scale_up_after: 1s, scale_down_after: 3s, register_timeout: 60s, spot_fallback_after: 5s, "
      "hook_timeout: 30s}\npools:\n";
  for (const char* name : {"spot", "ondemand"}) {
    bool spot = std::string(name) == "spot";
    pools += fmt::format(
        "  - name: {}\n    gpu_type: A100-80GB\n    gpus_per_node: 2\n    capacity: {}\n    min_nodes: {}\n"
        "    max_nodes: {}\n    scale_up_command: \"{}\"\n    scale_down_command: \"{}\"\n",
        name, spot ? "spot" : "on_demand", spot ? 1 : 0, spot ? 3 : 2, c.CloudHook(name, "up"),
        c.CloudHook(name, "down"));
  }
  return pools;
}

// The node a running job is on ("" when it is not placed).
std::string NodeOf(ElasticCluster& c, const std::string& id) {
  nlohmann::json job = c.Job(id);
  if (!job.contains("placement") || job["placement"].empty()) return "";
  return job["placement"][0].value("node", "");
}

class Timeline {
 public:
  void Mark(const std::string& what) {
    double s = std::chrono::duration<double>(Clock::now() - t0_).count();
    lines_ += fmt::format("  {:6.1f} s  {}\n", s, what);
  }
  ~Timeline() { std::printf("elastic timeline (from the server's start):\n%s", lines_.c_str()); }

 private:
  Clock::time_point t0_ = Clock::now();
  std::string lines_;
};

TEST(ElasticPools, ABurstGrowsTheSpotPoolAReclaimMovesACheckpointingJobAndThePoolsShrinkBack) {
  ElasticCluster c("elastic-e2e", {"spot", "ondemand"});
  c.WritePools(PoolsYaml(c));
  Timeline t;
  c.Start();
  t.Mark("server up; pools spot (1..3) and ondemand (0..2)");
  ASSERT_TRUE(c.WaitFor([&] { return c.LiveNodes().count("spot-0"); }, 20)) << "the spot pool's minimum never came";
  t.Mark("spot-0 registered (the spot pool's minimum)");

  // A checkpointing job: counts to 40 in steps of 0.25 s, saves its step on SIGTERM to a
  // directory every node sees, and resumes from it on its next run. Its first run does not
  // end before its node is reclaimed, and the other jobs end only once the test has sent the
  // reclaim (the file `go`): on a loaded machine the nodes come up seconds apart, and no job
  // may end before all four have run together.
  const std::string ckpt = c.dir() + "/ckpt";
  std::filesystem::create_directories(ckpt);
  std::filesystem::permissions(ckpt, std::filesystem::perms::all);
  const std::string go = ckpt + "/go";
  const std::string train = fmt::format(
      "s=$(cat {0}/step 2>/dev/null || echo 0); echo \"run $GANTRY_RESTART_COUNT from step $s\" >> {0}/runs; "
      "trap 'echo $s > {0}/step; echo saved $s >> {0}/runs; exit 143' TERM; "
      "while [ $s -lt 40 ] || [ \"$GANTRY_RESTART_COUNT\" = 0 ]; do [ $s -lt 40 ] && s=$((s+1)); sleep 0.25; done; "
      "echo \"done at $s\" >> {0}/runs",
      ckpt);
  const std::string after_go = fmt::format("until [ -e {} ]; do sleep 0.2; done; sleep 1", go);
  nlohmann::json trainer = {
      {"name", "trainer"}, {"gpus", 2}, {"gpu_types", nlohmann::json::array({"A100-80GB"})}, {"command", train}};
  std::string trainer_id = c.Submit(trainer.dump());
  std::vector<std::string> burst;
  for (int i = 0; i < 2; ++i) {
    burst.push_back(c.Submit(nlohmann::json{
        {"name", "burst"}, {"gpus", 2}, {"gpu_types", nlohmann::json::array({"A100-80GB"})}, {"command", after_go}}
                                 .dump()));
  }
  std::string critical = c.Submit(nlohmann::json{
      {"name", "critical"},
      {"gpus", 2},
      {"gpu_types", nlohmann::json::array({"A100-80GB"})},
      {"priority", "critical"},
      {"preemptible", false},
      {"command", after_go}}.dump());
  t.Mark("submitted: trainer (checkpoints), 2 burst jobs (2 GPUs each), 1 critical job");

  std::string reason;
  c.WaitFor([&] { return (reason = c.QueueReason(critical)).find("from pool ondemand") != std::string::npos; }, 10);
  EXPECT_NE(reason.find("waiting for a node from pool ondemand (requested"), std::string::npos) << reason;
  t.Mark("queue: critical job '" + reason + "'");

  auto all_running = [&] {
    for (const std::string& id : {trainer_id, burst[0], burst[1], critical}) {
      if (c.JobState(id) != "running") return false;
    }
    return true;
  };
  ASSERT_TRUE(c.WaitFor(all_running, 40)) << "not every job started";
  auto nodes = c.LiveNodes();
  t.Mark(fmt::format("all 4 jobs running on {} nodes", nodes.size()));
  EXPECT_EQ(nodes.size(), 4u);
  for (const char* id : {"spot-0", "spot-1", "spot-2", "ondemand-0"}) EXPECT_TRUE(nodes.count(id)) << id;
  EXPECT_EQ(NodeOf(c, critical), "ondemand-0") << "critical work never goes to spot";

  // The cloud reclaims the trainer's node with 2 s of notice.
  std::this_thread::sleep_for(std::chrono::seconds(2));  // some steps done
  std::string reclaimed = NodeOf(c, trainer_id);
  ASSERT_EQ(reclaimed.rfind("spot-", 0), 0u) << reclaimed;
  c.Cloud("reclaim " + reclaimed + " 2");
  std::ofstream(go).flush();
  t.Mark("fake cloud: reclaim notice for " + reclaimed + " (2 s)");
  std::string second;
  ASSERT_TRUE(c.WaitFor(
      [&] { return c.Job(trainer_id).value("runs", 0) >= 2 && !(second = NodeOf(c, trainer_id)).empty(); }, 30))
      << "the trainer never started again";
  t.Mark("trainer requeued and started again (run 2) on " + second);
  EXPECT_NE(second, reclaimed) << "it must resume elsewhere";
  ASSERT_TRUE(c.WaitFor([&] { return c.JobState(trainer_id) == "succeeded"; }, 40));
  t.Mark("trainer succeeded");
  std::string runs = ReadFileNoThrow(ckpt + "/runs").value_or("");
  EXPECT_NE(runs.find("run 0 from step 0"), std::string::npos) << runs;
  EXPECT_NE(runs.find("saved "), std::string::npos) << runs;
  EXPECT_NE(runs.find("run 1 from step "), std::string::npos) << runs;
  EXPECT_EQ(runs.find("run 1 from step 0\n"), std::string::npos) << "the second run resumes: " << runs;
  EXPECT_NE(runs.find("done at 40"), std::string::npos) << runs;
  nlohmann::json events = Json(c.Root().Get("/v1/jobs/" + trainer_id + "/events"));
  EXPECT_NE(events.dump().find("\"reclaim\""), std::string::npos) << events.dump();
  EXPECT_EQ(c.Metric(R"(gantry_spot_reclaims_total{pool="spot"})"), 1);

  for (const std::string& id : {burst[0], burst[1], critical}) {
    EXPECT_TRUE(c.WaitFor([&] { return c.JobState(id) == "succeeded"; }, 30)) << id;
  }
  t.Mark("every job succeeded");
  // Idle for scale_down_after: spot back to its minimum of 1, on-demand to 0.
  auto shrunk = [&] {
    auto live = c.LiveNodes();
    return live.size() == 1 && live.begin()->first.rfind("spot-", 0) == 0;
  };
  ASSERT_TRUE(c.WaitFor(shrunk, 40)) << nlohmann::json(c.LiveNodes()).dump();
  std::string cloud;
  EXPECT_TRUE(
      c.WaitFor([&] { return (cloud = c.Cloud("nodes")).find('\n') + 1 == cloud.size() && !cloud.empty(); }, 10))
      << "the fake cloud still runs: " << cloud;
  t.Mark("pools back to their minimum; the fake cloud runs " + cloud.substr(0, cloud.size() - 1));
  double ups = c.Metric(R"(gantry_pool_scale_up_calls_total{pool="spot"})");
  double downs = c.Metric(R"(gantry_pool_scale_down_calls_total{pool="spot"})");
  t.Mark(fmt::format("spot pool: {} scale-up calls, {} scale-down calls; {} nodes returned", ups, downs,
                     c.Metric(R"(gantry_pool_nodes_returned_total{pool="spot"})")));
  EXPECT_GE(ups, 2);
  EXPECT_LE(ups, 4) << "minimum, burst, replacement (and at most one more)";
  EXPECT_EQ(c.Metric(R"(gantry_pool_scale_up_failures_total{pool="spot"})"), 0);
  // The fake cloud's knob: no spot capacity makes its scale-up exit 3, starting nothing.
  std::filesystem::create_directories(c.dir() + "/cloud/no-capacity");
  std::ofstream(c.dir() + "/cloud/no-capacity/spot");
  std::string refused = c.Cloud("up spot 1 2>&1; echo rc=$?");
  EXPECT_NE(refused.find("no capacity in pool spot"), std::string::npos) << refused;
  EXPECT_NE(refused.find("rc=3"), std::string::npos) << refused;
  EXPECT_EQ(c.Cloud("nodes"), cloud) << "nothing started";
  // The bill: spot GPU-hours apart.
  nlohmann::json bill = Json(c.Root().Get("/v1/reports/monthly"));
  EXPECT_NE(bill.dump().find("\"spot\""), std::string::npos) << bill.dump().substr(0, 2000);
}

}  // namespace
}  // namespace gantry::testing
