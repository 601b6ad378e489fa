// Dependencies as Slurm's --dependency: a job waits outside the queue, with the reason,
// until the jobs it names have started, succeeded, failed or ended; one whose dependency
// can never be met fails saying why; singleton runs one job of a name at a time; aftercorr
// pairs array tasks.
#include <gtest/gtest.h>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

std::string Submit(Harness& h, const std::string& fields) {
  ApiAnswer a = h.Submit("{gpus: 1, command: 'true'" + fields + "}", kAlice);
  EXPECT_EQ(a.status, 201) << fields << " -> " << a.body.dump();
  h.controller->Sync();
  return a.body.value("id", "");
}

TEST(Dependencies, APipelineRunsStepByStep) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string prep = Submit(h, "");
  std::string train = Submit(h, ", dependency: 'afterok:" + prep + "'");
  std::string eval = Submit(h, ", dependency: 'afterany:" + train + "'");
  std::string report = Submit(h, ", dependency: 'after:" + prep + "'");  // started is enough
  EXPECT_EQ(h.State(train, kAlice), "pending");
  EXPECT_EQ(h.State(report, kAlice), "running");
  nlohmann::json queue = Api(h.controller->Queue(kAlice)).body;
  ASSERT_EQ(queue["blocked"].size(), 2u) << queue.dump();
  EXPECT_EQ(queue["blocked"][0]["code"], "dependency");
  EXPECT_EQ(queue["blocked"][0]["reason"], "afterok: waits for job " + prep + " to succeed");
  ExitRun(h, prep, 0);
  EXPECT_EQ(h.State(train, kAlice), "running");
  EXPECT_EQ(h.State(eval, kAlice), "pending");
  ExitRun(h, train, 2);  // afterany: any end will do
  EXPECT_EQ(h.State(eval, kAlice), "running");
}

TEST(Dependencies, ADependencyThatCanNeverBeMetFailsTheJobSayingWhy) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string first = Submit(h, "");
  std::string on_ok = Submit(h, ", dependency: 'afterok:" + first + "'");
  std::string on_fail = Submit(h, ", dependency: 'afternotok:" + first + "'");
  std::string chained = Submit(h, ", dependency: 'afterok:" + on_ok + "'");
  ExitRun(h, first, 1);
  h.controller->Sync();
  ApiAnswer failed = Api(h.controller->GetJob(kAlice, on_ok));
  EXPECT_EQ(failed.body["state"], "failed");
  EXPECT_EQ(failed.body["reason"], "dependency never satisfied: job " + first + " failed (afterok)");
  EXPECT_EQ(h.State(on_fail, kAlice), "running");
  EXPECT_EQ(h.State(chained, kAlice), "failed");  // its own dependency failed in turn
}

TEST(Dependencies, SingletonRunsOneJobOfANameAtATime) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string first = Submit(h, ", name: nightly, dependency: singleton");
  std::string second = Submit(h, ", name: nightly, dependency: singleton");
  std::string other = Submit(h, ", name: other, dependency: singleton");
  EXPECT_EQ(h.State(first, kAlice), "running");
  EXPECT_EQ(h.State(second, kAlice), "pending");
  EXPECT_EQ(h.State(other, kAlice), "running");
  ExitRun(h, first, 0);
  EXPECT_EQ(h.State(second, kAlice), "running");
}

TEST(Dependencies, AftercorrPairsTheTasksOfTwoArrays) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string a = Submit(h, ", array: '0-2'");
  std::string b = Submit(h, ", array: '0-2', dependency: 'aftercorr:" + a + "'");
  EXPECT_EQ(h.State(b + "_1", kAlice), "pending");
  ExitRun(h, a + "_1", 0);
  EXPECT_EQ(h.State(b + "_1", kAlice), "running");
  EXPECT_EQ(h.State(b + "_0", kAlice), "pending");
  ExitRun(h, a + "_2", 3);
  EXPECT_EQ(h.State(b + "_2", kAlice), "failed");
}

TEST(Dependencies, AnArraysIdStandsForAllItsTasks) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string sweep = Submit(h, ", array: '0-1'");
  std::string merge = Submit(h, ", dependency: 'afterok:" + sweep + "'");
  ExitRun(h, sweep + "_0", 0);
  EXPECT_EQ(h.State(merge, kAlice), "pending");
  ExitRun(h, sweep + "_1", 0);
  EXPECT_EQ(h.State(merge, kAlice), "running");
}

TEST(Dependencies, BadDependenciesAreRefusedNamingTheField) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 8)});
  std::string job = Submit(h, "");
  for (const std::string& dep : {std::string("afterok:999"), "aftercorr:" + job, "afterok:" + job + "_3",
                                 std::string("afterok"), std::string("before:" + job), "afterok:" + job + "?afterany:1",
                                 "afterok:" + job + "+5", std::string("singleton:3"), std::string("afterok:abc")}) {
    auto spec = ParseJobSpecText("{gpus: 1, command: 'true', dependency: '" + dep + "'}");
    ApiAnswer r = spec ? Api(h.controller->Submit(kAlice, *spec, "")) : Api(spec.status());
    EXPECT_EQ(r.status, 400) << dep << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], "dependency") << dep << " -> " << r.body.dump();
  }
}

TEST(Dependencies, AChangeThatWouldMakeACycleIsRefused) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 1)});
  Submit(h, "");  // fills the node
  std::string a = Submit(h, "");
  std::string b = Submit(h, ", dependency: 'afterok:" + a + "'");
  ApiAnswer r = h.Update(kAlice, a, "{dependency: 'afterok:" + b + "'}");
  EXPECT_EQ(r.status, 400) << r.body.dump();
  EXPECT_EQ(r.body["error"]["field"], "dependency");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("a cycle"), std::string::npos) << r.body.dump();
  // Dropping b's dependency frees it to queue.
  ApiAnswer dropped = h.Update(kAlice, b, "{dependency: ''}");
  ASSERT_EQ(dropped.status, 200) << dropped.body.dump();
  h.controller->Sync();
  EXPECT_EQ(Api(h.controller->Queue(kAlice)).body["queue"].size(), 2u);
}

}  // namespace
}  // namespace gantry::testing
