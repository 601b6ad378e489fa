// The `gantry demo` binary end to end: the README's main job on the shipped example.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command_util.h"

namespace {

using gantry::testing::RunCommand;

const std::string kDemo = std::string(GANTRY_BINARY) + " demo --cluster " GANTRY_SOURCE_DIR
                                                       "/examples/clusters/demo.yaml --scenario " GANTRY_SOURCE_DIR
                                                       "/examples/scenarios/demo.yaml";

TEST(DemoCommand, PlansTheExampleScenario) {
  std::string out;
  ASSERT_EQ(RunCommand(kDemo + " -o json", &out), 0) << out;
  auto doc = nlohmann::json::parse(out);
  const auto& cycles = doc["cycles"];
  ASSERT_EQ(cycles.size(), 4u);
  // 09:00: the two refused jobs name their field; the gang takes both A100 nodes.
  EXPECT_EQ(cycles[0]["refused"][0], "vis-bad-1: refused: gpus: must be at least 1, got -2");
  bool gang = false;
  for (const auto& s : cycles[0]["starts"]) {
    if (s["job"] == "nlp-train-1") gang = s["placement"].size() == 2;
  }
  EXPECT_TRUE(gang);
  EXPECT_EQ(cycles[0]["mig_changes"].size(), 1u);
  // 09:30: high nlp-train-2 evicts the medium gang (2 min grace); the short vis-sweep-1
  // (0.7 GPU-hours) backfills onto free H100s; the long vis-long-1 holds a reservation.
  ASSERT_EQ(cycles[1]["preemptions"].size(), 1u);
  EXPECT_EQ(cycles[1]["preemptions"][0]["job"], "nlp-train-1");
  EXPECT_EQ(cycles[1]["preemptions"][0]["for_job"], "nlp-train-2");
  EXPECT_EQ(cycles[1]["preemptions"][0]["reason"], "priority");
  EXPECT_EQ(cycles[1]["preemptions"][0]["stop_at"], "2026-11-26T09:32:00Z");
  EXPECT_EQ(cycles[1]["waiting"][0]["job"], "nlp-train-2");
  EXPECT_EQ(cycles[1]["waiting"][0]["code"], "preempting");
  ASSERT_EQ(cycles[1]["starts"].size(), 1u);
  EXPECT_EQ(cycles[1]["starts"][0]["job"], "vis-sweep-1");
  EXPECT_TRUE(cycles[1]["starts"][0]["backfilled"].get<bool>());
  ASSERT_EQ(cycles[1]["reservations"].size(), 1u);
  EXPECT_EQ(cycles[1]["reservations"][0]["job"], "vis-long-1");
  EXPECT_EQ(cycles[1]["reservations"][0]["start"], "2026-11-26T09:50:00Z");  // vis-sweep-1 ends
  // 09:35: the evicted gang is back in the queue and nlp-train-2 runs on its GPUs.
  EXPECT_EQ(cycles[2]["evicted"][0], "nlp-train-1");
  EXPECT_EQ(cycles[2]["starts"][0]["job"], "nlp-train-2");
  EXPECT_EQ(cycles[2]["waiting"][0]["job"], "nlp-train-1");
  EXPECT_EQ(cycles[3]["status"]["queued"], 1);
}

TEST(DemoCommand, TextOutputExplainsWaits) {
  std::string out;
  ASSERT_EQ(RunCommand(kDemo, &out), 0);
  EXPECT_NE(out.find("reserved for 2026-11-26T09:50:00Z on h100-0"), std::string::npos) << out;
  EXPECT_NE(out.find("evict    nlp-train-1 for nlp-train-2 (priority): stops at 2026-11-26T09:32:00Z"),
            std::string::npos);
  EXPECT_NE(out.find("[backfill]"), std::string::npos);
}

TEST(DemoCommand, BadClusterFileNamesTheField) {
  std::string path = ::testing::TempDir() + "/bad_cluster.yaml";
  FILE* f = fopen(path.c_str(), "w");
  fputs("node_groups: [{name: x, count: 1, gpu_type: H300, gpus_per_node: 8}]\n", f);
  fclose(f);
  std::string out;
  int rc = RunCommand(std::string(GANTRY_BINARY) + " demo --cluster " + path +
                          " --scenario " GANTRY_SOURCE_DIR "/examples/scenarios/demo.yaml 2>&1",
                      &out);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("node_groups[0].gpu_type: unknown GPU type 'H300'"), std::string::npos) << out;
}

}  // namespace
