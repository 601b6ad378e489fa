// A job named by another spelling of its id ("0" + its id, which the id parser reads as the
// same number) is acted on as itself: its stored id never changes, and the indexes and the
// agent's orders keyed by it stay whole. Before, a team member's PATCH of a running job by
// "0ID" stored "0ID" as the job's id and the server ended on an uncaught out_of_range, and
// checkpoint-done by "0ID" answered 500.
#include <gtest/gtest.h>

#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

TEST(JobIdSpellings, AnotherSpellingOfARunningJobsIdActsOnTheJobItself) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string id = h.Submit("{gpus: 4, priority: low, time_limit: 2h, command: 'sleep 1000'}", kAlice).body["id"];
  ASSERT_EQ(h.State(id, kAlice), "running");
  ApiAnswer shorter = h.Update(kAlice, "0" + id, "{time_limit: 1h}");
  ASSERT_EQ(shorter.status, 200) << shorter.body.dump();
  EXPECT_EQ(shorter.body["id"], id);
  h.controller->Sync();
  ApiAnswer view = Api(h.controller->GetJob(kAlice, id));
  ASSERT_EQ(view.status, 200) << view.body.dump();
  EXPECT_EQ(view.body["id"], id);
  EXPECT_EQ(view.body["spec"]["time_limit_s"], 3600);

  // Preempted, its checkpoint reported by another spelling: the stop order names the job.
  h.now += 11 * kMinuteMs;
  h.Submit("{gpus: 4, priority: critical, command: 'true'}", kBob);
  h.controller->Sync();
  ASSERT_EQ(h.State(id, kAlice), "stopping");
  ApiAnswer done = Api(h.controller->CheckpointDone(kAlice, "00" + id));
  ASSERT_EQ(done.status, 200) << done.body.dump();
  h.controller->Sync();
  std::lock_guard<std::mutex> lock(h.link.mu);
  ASSERT_EQ(h.link.stops.size(), 2u);
  EXPECT_EQ(h.link.stops[1].job_id, id);
  EXPECT_EQ(h.link.stops[1].grace_ms, 0);
}

}  // namespace
}  // namespace gantry::testing
