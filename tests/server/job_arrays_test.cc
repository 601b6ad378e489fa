// Job arrays: one submit makes a job per task, each told its task index; `%N` keeps at
// most N tasks queued or running; tasks are addressed as ARRAY_TASK and the array's id
// stands for all of them; the limit holds across a restart.
#include <gtest/gtest.h>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

std::vector<std::string> RunningIds(Harness& h) {
  std::vector<std::string> ids;
  JobFilter running;
  running.state = "running";
  ApiAnswer list = Api(h.controller->ListJobs(kAlice, running));
  for (const auto& j : list.body["jobs"]) ids.push_back(j["id"]);
  return ids;
}

TEST(JobArrays, TasksRunAtMostTheLimitAtOnceEachToldItsIndex) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  ApiAnswer a = h.Submit("{gpus: 1, array: '0-9:3%2', command: 'true'}", kAlice);
  ASSERT_EQ(a.status, 201) << a.body.dump();
  std::string array = a.body["id"];
  EXPECT_EQ(a.body["array"]["tasks"], 4);
  EXPECT_EQ(a.body["array"]["task_ids"], "0-9:3");
  h.controller->Sync();
  ASSERT_EQ(RunningIds(h).size(), 2u);  // eight GPUs free, the limit is 2
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.starts.size(), 2u);
    EXPECT_EQ(h.link.starts[0].spec->env.at("SLURM_ARRAY_JOB_ID"), array);
    EXPECT_EQ(h.link.starts[0].spec->env.at("GANTRY_ARRAY_TASK_ID"), "0");
    EXPECT_EQ(h.link.starts[1].spec->env.at("SLURM_ARRAY_TASK_ID"), "3");
    EXPECT_EQ(h.link.starts[1].spec->env.at("SLURM_ARRAY_TASK_COUNT"), "4");
    EXPECT_EQ(h.link.starts[1].spec->env.at("SLURM_ARRAY_TASK_STEP"), "3");
  }
  nlohmann::json queue = Api(h.controller->Queue(kAlice)).body;
  ASSERT_EQ(queue["blocked"].size(), 2u) << queue.dump();
  EXPECT_EQ(queue["blocked"][0]["code"], "array_limit");
  EXPECT_EQ(queue["blocked"][0]["array_task_id"], 6);
  // A task is addressed as ARRAY_TASK; when it ends the next task starts.
  ApiAnswer task = Api(h.controller->GetJob(kAlice, array + "_3"));
  ASSERT_EQ(task.status, 200);
  EXPECT_EQ(task.body["array_task_id"], 3);
  ExitRun(h, array + "_3", 0);
  EXPECT_EQ(h.State(array + "_3", kAlice), "succeeded");
  EXPECT_EQ(h.State(array + "_6", kAlice), "running");
  EXPECT_EQ(h.State(array + "_9", kAlice), "pending");
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, array + "_4")).status, 404);
  // The array's id cancels every task that has not ended.
  ApiAnswer cancelled = Api(h.controller->Cancel(kAlice, array));
  ASSERT_EQ(cancelled.status, 200) << cancelled.body.dump();
  EXPECT_EQ(h.State(array + "_9", kAlice), "cancelled");
  EXPECT_EQ(h.State(array + "_0", kAlice), "stopping");
  EXPECT_EQ(h.State(array + "_3", kAlice), "succeeded");
}

TEST(JobArrays, TheLimitHoldsAcrossARestart) {
  std::string db = Harness::Fresh();
  std::string array;
  {
    Harness h(db);
    h.Attach({MakeNode("n1", "A100-80GB", 8)});
    array = h.Submit("{gpus: 1, array: '1-5%1', command: 'true'}", kAlice).body["id"];
    h.controller->Sync();
    EXPECT_EQ(RunningIds(h).size(), 1u);
  }
  Harness h(db);
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  h.controller->Sync();
  EXPECT_EQ(RunningIds(h).size(), 1u);
  EXPECT_EQ(h.State(array + "_2", kAlice), "pending");
  ExitRun(h, array + "_1", 0);
  EXPECT_EQ(h.State(array + "_2", kAlice), "running");
  EXPECT_EQ(RunningIds(h).size(), 1u);
}

TEST(JobArrays, HoldAndReleaseTakeTheWholeArray) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  h.Submit("{gpus: 2, command: 'true'}", kAlice);  // the node is full: the tasks wait
  std::string array = h.Submit("{gpus: 1, array: '0-2', command: 'true'}", kAlice).body["id"];
  ASSERT_EQ(Api(h.controller->Hold(kAlice, array)).status, 200);
  nlohmann::json queue = Api(h.controller->Queue(kAlice)).body;
  EXPECT_TRUE(queue["queue"].empty()) << queue.dump();
  EXPECT_EQ(queue["blocked"].size(), 3u);
  ASSERT_EQ(Api(h.controller->Release(kAlice, array)).status, 200);
  h.controller->Sync();
  EXPECT_EQ(Api(h.controller->Queue(kAlice)).body["queue"].size(), 3u);
}

TEST(JobArrays, BadArraySpecsAreRefusedNamingTheField) {
  for (const char* bad : {"'5-1'", "'0-99999999'", "'0-20000'", "'1,x'", "'0-9%0'", "'0-9:0'", "'%4'", "'-3'"}) {
    auto spec = ParseJobSpecText(std::string("{gpus: 1, array: ") + bad + "}");
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().field(), "array") << bad << ": " << spec.status().message();
  }
  EXPECT_EQ(ParseArraySpec("1,5,9")->tasks, (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(ParseArraySpec("0-99%8")->limit, 8);
  EXPECT_EQ(ParseArraySpec("0-9999")->tasks.size(), 10000u);
  EXPECT_EQ(FormatTaskList({0, 1, 2, 3, 7, 9, 11, 13, 20}), "0-3,7-13:2,20");
}

// Ten thousand tasks in one call: one store batch, all of them durable.
TEST(JobArrays, TenThousandTasksSubmitInOneCall) {
  std::string db = Harness::Fresh();
  std::string array;
  {
    Harness h(db);
    h.Attach({MakeNode("n1", "A100-80GB", 8)});
    ApiAnswer a = h.Submit("{gpus: 1, array: '0-9999%4', command: 'true'}", kAlice);
    ASSERT_EQ(a.status, 201) << a.body.dump();
    array = a.body["id"];
    EXPECT_EQ(a.body["array"]["tasks"], 10000);
  }
  Harness h(db);
  EXPECT_EQ(h.State(array + "_9999", kAlice), "pending");
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, array)).body["array"]["states"]["pending"],
            9996);  // four started before the restart
}

}  // namespace
}  // namespace gantry::testing
