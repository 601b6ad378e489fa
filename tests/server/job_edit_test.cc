// Changing jobs after submit: hold and release keep a pending job out of the queue and
// put it back; update changes a pending job as a new submit would be checked, and only
// the time limit of a running job (shorter by its team, longer by admins only).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

constexpr const char* kFourGpus = "{gpus: 4, command: 'true'}";

TEST(JobEdit, AHeldJobWaitsOutsideTheQueueUntilReleased) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string first = h.Submit(kFourGpus, kAlice).body["id"];
  std::string second = h.Submit(kFourGpus, kAlice).body["id"];
  ApiAnswer held = Api(h.controller->Hold(kAlice, second));
  ASSERT_EQ(held.status, 200) << held.body.dump();
  EXPECT_EQ(held.body["held"], "user");
  ApiAnswer queue = Api(h.controller->Queue(kAlice));
  EXPECT_TRUE(queue.body["queue"].empty()) << queue.body.dump();
  ASSERT_EQ(queue.body["blocked"].size(), 1u);
  EXPECT_EQ(queue.body["blocked"][0]["id"], second);
  // The GPUs free up; the held job does not take them.
  h.controller->RunExited(ExitReport(first, 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(second, kAlice), "pending");
  EXPECT_EQ(h.link.starts.size(), 1u);
  ApiAnswer released = Api(h.controller->Release(kAlice, second));
  ASSERT_EQ(released.status, 200) << released.body.dump();
  h.controller->Sync();
  EXPECT_EQ(h.State(second, kAlice), "running");
  // Only a pending job is held; releasing a job that is not held says so.
  EXPECT_EQ(Api(h.controller->Hold(kAlice, second)).status, 409);
  EXPECT_EQ(Api(h.controller->Release(kAlice, second)).status, 409);
}

TEST(JobEdit, AnAdminsHoldIsReleasedByAdminsOnlyAndSurvivesARestart) {
  std::string db = Harness::Fresh();
  std::string id;
  {
    Harness h(db);
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    h.Submit(kFourGpus, kAlice);
    id = h.Submit(kFourGpus, kAlice).body["id"];
    ASSERT_EQ(Api(h.controller->Hold(kAdmin, id)).body["held"], "admin");
    // The owner's own hold does not weaken an admin's.
    EXPECT_EQ(Api(h.controller->Hold(kAlice, id)).body["held"], "admin");
    ApiAnswer refused = Api(h.controller->Release(kAlice, id));
    EXPECT_EQ(refused.status, 403);
    EXPECT_EQ(refused.body["error"]["field"], "id");
  }
  Harness h(db);
  h.Attach({MakeNode("n1", "A100-80GB", 8)});  // room for it now: still held
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "pending");
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, id)).body["held"], "admin");
  ASSERT_EQ(Api(h.controller->Release(kAdmin, id)).status, 200);
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "running");
}

TEST(JobEdit, APendingJobsFieldsChangeCheckedAsASubmitIs) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4), MakeNode("t1", "T4", 4)});
  h.Submit("{gpus: 4, gpu_types: [A100-80GB], command: 'true'}", kAlice);
  std::string id = h.Submit("{gpus: 4, gpu_types: [A100-80GB], command: 'true'}", kAlice).body["id"];
  ApiAnswer changed = h.Update(kAlice, id, "{time_limit: 2h, priority: high, name: sweep-7}");
  ASSERT_EQ(changed.status, 200) << changed.body.dump();
  EXPECT_EQ(changed.body["priority"], "high");
  EXPECT_EQ(changed.body["name"], "sweep-7");
  EXPECT_EQ(changed.body["spec"]["time_limit_s"], 7200);
  // Refusals name the field and change nothing.
  struct Case {
    const char* changes;
    int status;
    const char* field;
  };
  const Case cases[] = {
      {"{command: 'rm -rf /'}", 400, "command"},  // not changeable after submit
      {"{gpu_types: [Z100]}", 400, "gpu_types"}, {"{time_limit: -5m}", 400, "time_limit"},
      {"{priority: nonsense}", 400, "priority"}, {"[1, 2]", 400, "body"},
  };
  for (const Case& c : cases) {
    ApiAnswer r = h.Update(kAlice, id, c.changes);
    EXPECT_EQ(r.status, c.status) << c.changes << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], c.field) << c.changes << " -> " << r.body.dump();
  }
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, id)).body["spec"]["time_limit_s"], 7200);
  // A new GPU type list moves it to the free T4s at the next cycle.
  ASSERT_EQ(h.Update(kAlice, id, "{gpu_types: [T4]}").status, 200);
  h.controller->Sync();
  ApiAnswer moved = Api(h.controller->GetJob(kAlice, id));
  EXPECT_EQ(moved.body["state"], "running");
  EXPECT_EQ(moved.body["placement"][0]["node"], "t1");
}

TEST(JobEdit, ARunningJobsTimeLimitIsShortenedByItsTeamAndExtendedByAdminsOnly) {
  Harness h("", /*tick_ms=*/20);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string id = h.Submit("{gpus: 4, time_limit: 2h, command: 'true'}", kAlice).body["id"];
  ApiAnswer longer = h.Update(kAlice, id, "{time_limit: 3h}");
  EXPECT_EQ(longer.status, 403) << longer.body.dump();
  EXPECT_EQ(longer.body["error"]["field"], "time_limit");
  EXPECT_EQ(h.Update(kAlice, id, "{name: other}").body["error"]["field"], "name");
  ASSERT_EQ(h.Update(kAlice, id, "{time_limit: 1h}").status, 200);
  ASSERT_EQ(h.Update(kAdmin, id, "{time_limit: 5h}").status, 200);
  // The limit in force is the new one: still running at 4h59m, stopping at 5h.
  h.now += 5 * kHourMs - 60'000;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // ticks pass
  EXPECT_EQ(h.State(id, kAlice), "running");
  h.now += 60'000;
  std::string state;
  for (int i = 0; i < 200 && state != "stopping"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    state = h.State(id, kAlice);
  }
  EXPECT_EQ(state, "stopping");
  EXPECT_NE(Api(h.controller->GetJob(kAlice, id)).body["reason"].get<std::string>().find("5h"), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
