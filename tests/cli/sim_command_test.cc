// `gantry sim` end to end: reports written, bad rows reported by line, --strict fatal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "command_util.h"

namespace {

// The command with its stderr folded into the output (errors are part of what is checked).
int RunCommand(const std::string& cmd, std::string* out) { return gantry::testing::RunCommand(cmd + " 2>&1", out); }

std::string Write(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

const std::string kCluster = GANTRY_SOURCE_DIR "/examples/clusters/single-v100.yaml";

TEST(SimCommand, WritesJsonAndHtmlAndReportsBadRows) {
  std::string trace = Write("t.csv",
                            "id,submit_time,duration_s,num_gpus,team\n"
                            "a,0,100,2,x\n"
                            "b,5,100,4,y\n"
                            "c,oops,100,1,y\n"
                            "d,9,50,1,x\n");
  std::string json = ::testing::TempDir() + "/out.json";
  std::string html = ::testing::TempDir() + "/out.html";
  std::string out;
  ASSERT_EQ(RunCommand(std::string(GANTRY_BINARY) + " sim --cluster " + kCluster + " --trace " + trace +
                           " --trace-format csv --compare fifo,backfill --json " + json + " --html " + html,
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("skipped line 4: submit_time"), std::string::npos) << out;
  std::ifstream j(json);
  auto doc = nlohmann::json::parse(j);
  const auto& fifo = doc["policies"]["fifo"];
  EXPECT_EQ(fifo["jobs_total"], 3);
  EXPECT_EQ(fifo["rows_skipped"], 1);
  EXPECT_EQ(fifo["jobs_completed"], 3);
  for (const char* key :
       {"makespan_s", "gpu_utilization", "gpu_utilization_when_queued", "jct_p99_s", "queue_delay_p95_s",
        "queue_delay_max_s", "preemptions", "max_team_starvation_s", "jain_fairness", "sim_wall_s", "per_team"}) {
    EXPECT_TRUE(fifo.contains(key)) << key;
  }
  EXPECT_EQ(fifo["per_team"]["x"]["jobs"], 2);
  std::stringstream page;
  page << std::ifstream(html).rdbuf();
  EXPECT_NE(page.str().find("<svg"), std::string::npos);
  EXPECT_NE(page.str().find("Queueing delay (CDF)"), std::string::npos);
  EXPECT_EQ(page.str().find("<script"), std::string::npos);  // self-contained, no scripts
}

TEST(SimCommand, SaysWhyFifoAndPriorityCameOutTheSame) {
  std::string trace = Write("same.csv",
                            "id,submit_time,duration_s,num_gpus,team\n"
                            "a,0,100,1,x\n"
                            "b,5,100,1,y\n");
  std::string html = ::testing::TempDir() + "/same.html";
  std::string out;
  ASSERT_EQ(RunCommand(std::string(GANTRY_BINARY) + " sim --cluster " + kCluster + " --trace " + trace +
                           " --trace-format csv --compare fifo,priority --html " + html,
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("note: fifo and priority give the same figures here: every job of this trace has the same "
                     "priority class"),
            std::string::npos)
      << out;
  std::stringstream page;
  page << std::ifstream(html).rdbuf();
  EXPECT_NE(page.str().find("<p class='note'>fifo and priority give the same figures"), std::string::npos);
}

// --jobs-csv: one row per job and policy. On the 4-GPU node a holds all 4 GPUs 0-100 s,
// b (2 GPUs, 50 s) waits from 10 s to 100 s, and c (8 GPUs) can never fit.
TEST(SimCommand, WritesOneCsvRowPerJobAndPolicy) {
  std::string trace = Write("jobs.csv",
                            "id,submit_time,duration_s,num_gpus,team,user\n"
                            "a,0,100,4,x,ann\n"
                            "b,10,50,2,y,bo\n"
                            "c,20,10,8,y,bo\n");
  std::string csv = ::testing::TempDir() + "/jobs-out.csv";
  std::string out;
  ASSERT_EQ(RunCommand(std::string(GANTRY_BINARY) + " sim --cluster " + kCluster + " --trace " + trace +
                           " --trace-format csv --compare fifo,gantry --jobs-csv " + csv,
                       &out),
            0)
      << out;
  std::stringstream rows;
  rows << std::ifstream(csv).rdbuf();
  const std::string text = rows.str();
  EXPECT_EQ(
      text.substr(0, text.find('\n')),
      "policy,id,team,user,gpus,gpu_types,submit_s,first_start_s,end_s,queue_delay_s,jct_s,run_s,evictions,state");
  for (const char* policy : {"fifo", "gantry"}) {
    const std::string p(policy);
    EXPECT_NE(text.find(p + ",a,x,ann,4,,0,0,100,0,100,100,0,done\n"), std::string::npos) << text;
    EXPECT_NE(text.find(p + ",b,y,bo,2,,10,100,150,90,140,50,0,done\n"), std::string::npos) << text;
    EXPECT_NE(text.find(p + ",c,y,bo,8,,20,,,,,10,0,rejected\n"), std::string::npos) << text;
  }
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
}

TEST(SimCommand, StrictMakesABadRowFatal) {
  std::string trace = Write("bad.csv", "submit_time,duration_s,num_gpus\n0,10,1\n1,10,-4\n");
  std::string out;
  EXPECT_EQ(RunCommand(std::string(GANTRY_BINARY) + " sim --cluster " + kCluster + " --trace " + trace +
                           " --trace-format csv --strict",
                       &out),
            2);
  EXPECT_NE(out.find("line 3: num_gpus"), std::string::npos) << out;
}

TEST(SimCommand, UnknownPolicyIsRefused) {
  std::string trace = Write("ok.csv", "submit_time,duration_s,num_gpus\n0,10,1\n");
  std::string out;
  EXPECT_NE(RunCommand(std::string(GANTRY_BINARY) + " sim --cluster " + kCluster + " --trace " + trace +
                           " --trace-format csv --policy sjf",
                       &out),
            0);
  EXPECT_NE(out.find("--policy"), std::string::npos) << out;
}

}  // namespace
