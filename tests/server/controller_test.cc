// Controller: job transitions, preemption, recovery from the store, idempotency and team
// isolation, with a recording agent link and a hand-moved clock.
#include <gtest/gtest.h>

#include <thread>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

constexpr const char* kTwoGpus = "{gpus: 2, command: 'true'}";

TEST(Controller, SubmitStartsOnFreeGpusAtOnceAndSucceeds) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer r = h.Submit(kTwoGpus, kAlice);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  // The reply comes after the batch's cycle: the job already holds GPUs.
  EXPECT_EQ(r.body["state"], "running");
  EXPECT_EQ(r.body["user"], "alice");
  EXPECT_EQ(r.body["team"], "vision");
  std::string id = r.body["id"];
  h.controller->Sync();
  ASSERT_EQ(h.link.starts.size(), 1u);
  EXPECT_EQ(h.link.starts[0].job_id, id);
  EXPECT_EQ(h.link.starts[0].run, 1);
  EXPECT_EQ(h.link.starts[0].gpus.size(), 2u);
  h.controller->RunExited(ExitReport(id, 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "succeeded");
}

TEST(Controller, WaitingJobStartsWhenGpusAreFreed) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string first = h.Submit("{gpus: 4, command: 'true'}", kAlice).body["id"];
  ApiAnswer second = h.Submit("{gpus: 4, command: 'true'}", kAlice);
  EXPECT_EQ(second.body["state"], "pending");
  ApiAnswer queue = Api(h.controller->Queue(kAlice));
  ASSERT_EQ(queue.body["queue"].size(), 1u);
  EXPECT_EQ(queue.body["queue"][0]["id"], second.body["id"]);
  EXPECT_NE(queue.body["queue"][0]["reason"].get<std::string>().find("4 GPUs"), std::string::npos);
  h.controller->RunExited(ExitReport(first, 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(second.body["id"], kAlice), "running");
}

TEST(Controller, CancelPendingAtOnceAndRunningAfterItsProcessEnds) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string running = h.Submit("{gpus: 4, command: 'sleep 100'}", kAlice).body["id"];
  std::string pending = h.Submit("{gpus: 4, command: 'true'}", kAlice).body["id"];
  EXPECT_EQ(Api(h.controller->Cancel(kAlice, pending)).body["state"], "cancelled");
  EXPECT_EQ(Api(h.controller->Cancel(kAlice, running)).body["state"], "stopping");
  h.controller->Sync();
  ASSERT_EQ(h.link.stops.size(), 1u);
  EXPECT_EQ(h.link.stops[0].grace_ms, 5000);  // kill_wait: SIGTERM, then SIGKILL 5 s later
  h.controller->RunExited(ExitReport(running, 1, "n1", 143, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(running, kAlice), "cancelled");
  EXPECT_EQ(Api(h.controller->Cancel(kAlice, running)).status, 409);  // already over
}

TEST(Controller, NonZeroExitRetriesAsAskedThenFails) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string id = h.Submit("{gpus: 1, command: 'false', retries_on_failure: 1}", kAlice).body["id"];
  h.controller->RunExited(ExitReport(id, 1, "n1", 1, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "running");                // run 2
  h.controller->RunExited(ExitReport(id, 1, "n1", 1, ""));  // a stale report of run 1 changes nothing
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "running");
  h.controller->RunExited(ExitReport(id, 2, "n1", 3, ""));
  h.controller->Sync();
  ApiAnswer job = Api(h.controller->GetJob(kAlice, id));
  EXPECT_EQ(job.body["state"], "failed");
  EXPECT_EQ(job.body["exit_code"], 3);
  EXPECT_EQ(job.body["runs"], 2);
}

TEST(Controller, HigherPriorityJobPreemptsAndTheVictimRequeues) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string victim = h.Submit("{gpus: 4, priority: low, command: 'sleep 1000'}", kAlice).body["id"];
  h.now += 11 * kMinuteMs;  // past preemption.min_runtime (10m)
  ApiAnswer urgent = h.Submit("{gpus: 4, priority: critical, command: 'true'}", kBob);
  EXPECT_EQ(urgent.body["state"], "pending");
  h.controller->Sync();
  ASSERT_EQ(h.link.stops.size(), 1u);
  EXPECT_EQ(h.link.stops[0].job_id, victim);
  EXPECT_EQ(h.link.stops[0].grace_ms, 120000);  // preemption.grace_period
  EXPECT_EQ(h.State(victim, kAlice), "stopping");
  h.controller->RunExited(ExitReport(victim, 1, "n1", 143, ""));
  h.controller->Sync();
  ApiAnswer v = Api(h.controller->GetJob(kAlice, victim));
  EXPECT_EQ(v.body["state"], "pending");
  EXPECT_EQ(v.body["evictions"], 1);
  EXPECT_EQ(h.State(urgent.body["id"], kBob), "running");
}

TEST(Controller, TimeLimitStopsTheJob) {
  Harness h("", 20);  // a periodic tick every 20 ms
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string id = h.Submit("{gpus: 1, command: 'sleep 1000', time_limit: 1m}", kAlice).body["id"];
  h.now += 2 * kMinuteMs;
  for (int i = 0; i < 200 && h.State(id, kAlice) != "stopping"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(h.State(id, kAlice), "stopping");
  h.controller->RunExited(ExitReport(id, 1, "n1", 143, ""));
  h.controller->Sync();
  ApiAnswer job = Api(h.controller->GetJob(kAlice, id));
  EXPECT_EQ(job.body["state"], "failed");
  EXPECT_NE(job.body["reason"].get<std::string>().find("time limit"), std::string::npos);
}

TEST(Controller, RestartKeepsEveryJobAndAdoptsWhatStillRuns) {
  std::string db;
  std::string running, pending;
  {
    Harness h;
    db = h.db;
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    running = h.Submit("{gpus: 3, command: 'sleep 100'}", kAlice).body["id"];
    pending = h.Submit("{gpus: 2, command: 'true'}", kAlice).body["id"];
    h.Submit("{gpus: 1, command: 'true'}", kBob);
    h.controller.reset();  // as if killed: only what was committed remains
  }
  Harness h(db);
  RunReport still{running, 1, "n1", false, -1, ""};
  ASSERT_TRUE(h.controller->AttachNodes({MakeNode("n1", "A100-80GB", 4)}, &h.link, {still}).ok());
  h.controller->Sync();
  ApiAnswer job = Api(h.controller->GetJob(kAlice, running));
  EXPECT_EQ(job.body["state"], "running");
  EXPECT_EQ(job.body["runs"], 1);
  EXPECT_EQ(job.body["placement"][0]["gpus"].size(), 3u);
  EXPECT_EQ(h.State(pending, kAlice), "pending");
  // The adopted run was not started again.
  for (const StartOrder& o : h.link.starts) EXPECT_NE(o.job_id, running);
  EXPECT_EQ(h.Submit(kTwoGpus, kAlice).body["id"], "4");  // ids go on
}

TEST(Controller, RestartResendsAStartTheAgentNeverGot) {
  std::string db, id;
  {
    Harness h;
    db = h.db;
    h.Attach({MakeNode("n1", "A100-80GB", 4)});
    id = h.Submit(kTwoGpus, kAlice).body["id"];
  }
  Harness h(db);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});  // the agent knows no run
  h.controller->Sync();
  ASSERT_EQ(h.link.starts.size(), 1u);
  EXPECT_EQ(h.link.starts[0].job_id, id);
  EXPECT_EQ(h.link.starts[0].run, 1);  // the same run on the same GPUs, not a second placement
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, id)).body["runs"], 1);
}

TEST(Controller, IdempotencyKeyMakesOneJobPerKey) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer a = h.Submit(kTwoGpus, kAlice, "k1");
  ApiAnswer b = h.Submit(kTwoGpus, kAlice, "k1");
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(a.body["id"], b.body["id"]);
  EXPECT_TRUE(b.body["idempotent_replay"].get<bool>());
  ApiAnswer other = h.Submit("{gpus: 1, command: 'true'}", kAlice, "k1");
  EXPECT_EQ(other.status, 422);
  EXPECT_EQ(other.body["error"]["field"], "Idempotency-Key");
  EXPECT_EQ(h.Submit(kTwoGpus, kBob, "k1").status, 201);  // keys are per user
  EXPECT_EQ(Api(h.controller->ListJobs(kAdmin, {})).body["jobs"].size(), 2u);
}

TEST(Controller, UsersSeeAndCancelOnlyTheirTeamsJobs) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string mine = h.Submit(kTwoGpus, kAlice).body["id"];
  h.Submit(kTwoGpus, kBob);
  EXPECT_EQ(Api(h.controller->GetJob(kBob, mine)).status, 404);
  EXPECT_EQ(Api(h.controller->Cancel(kBob, mine)).status, 404);
  EXPECT_EQ(h.State(mine, kAlice), "running");
  ApiAnswer bobs = Api(h.controller->ListJobs(kBob, {}));
  ASSERT_EQ(bobs.body["jobs"].size(), 1u);
  EXPECT_EQ(bobs.body["jobs"][0]["team"], "nlp");
  EXPECT_FALSE(bobs.body["jobs"][0]["spec"].contains("command"));  // lists leave commands out
  EXPECT_EQ(Api(h.controller->ListJobs(kAdmin, {})).body["jobs"].size(), 2u);
  Actor teammate{"carol", "vision", Role::kUser};
  EXPECT_EQ(Api(h.controller->Cancel(teammate, mine)).status, 200);
}

TEST(Controller, RefusalsNameTheFieldAndChangeNothing) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  ApiAnswer team = h.Submit("{gpus: 1, team: nlp}", kAlice);
  EXPECT_EQ(team.status, 403);
  EXPECT_EQ(team.body["error"]["field"], "team");
  ApiAnswer zero = h.Submit("{gpus: 0}", kAlice);
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(zero.body["error"]["field"], "gpus");
  ApiAnswer type = h.Submit("{gpus: 1, gpu_types: [Z100]}", kAlice);
  EXPECT_EQ(type.body["error"]["field"], "gpu_types");
  ApiAnswer big = h.Submit("{gpus: 8}", kAlice);  // no node has 8 GPUs
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(big.body["error"]["field"], "gpus");
  ApiAnswer id = h.Submit("{gpus: 1, id: x}", kAlice);
  EXPECT_EQ(id.body["error"]["field"], "id");
  EXPECT_TRUE(Api(h.controller->ListJobs(kAdmin, {})).body["jobs"].empty());
}

TEST(Controller, OnlyAdminsDrainAndADrainedGpuGetsNoJob) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  EXPECT_EQ(Api(h.controller->SetDrain(kAlice, "n1", -1, true)).status, 403);
  EXPECT_EQ(Api(h.controller->SetDrain(kAdmin, "n9", -1, true)).status, 404);
  ASSERT_EQ(Api(h.controller->SetDrain(kAdmin, "n1", 0, true)).status, 200);
  ApiAnswer a = h.Submit("{gpus: 1, command: 'true'}", kAlice);
  EXPECT_EQ(a.body["placement"][0]["gpus"][0]["index"], 1);  // GPU 0 is fenced
  EXPECT_EQ(h.Submit("{gpus: 1, command: 'true'}", kAlice).body["state"], "pending");
  ASSERT_EQ(Api(h.controller->SetDrain(kAdmin, "n1", -1, true)).status, 200);
  ApiAnswer nodes = Api(h.controller->Nodes(kAdmin));
  EXPECT_EQ(nodes.body["nodes"][0]["state"], "draining");  // a job still runs there
  h.controller->RunExited(ExitReport(a.body["id"], 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_EQ(Api(h.controller->Nodes(kAdmin)).body["nodes"][0]["state"], "drained");
  ASSERT_EQ(Api(h.controller->SetDrain(kAdmin, "n1", -1, false)).status, 200);
  ASSERT_EQ(Api(h.controller->SetDrain(kAdmin, "n1", 0, false)).status, 200);
  h.controller->Sync();
  h.controller->Sync();
  ApiAnswer cluster = Api(h.controller->Cluster());
  EXPECT_EQ(cluster.body["running"], 1);  // the waiting job started once the node was back
}

}  // namespace
}  // namespace gantry::testing

namespace gantry::testing {
namespace {

// The MIG change the engine plans travels with the start order; the agent's report names
// the instance (a later job on it gets its device), and a failed change requeues the job
// as a fault with the GPU taken as the agent found it.
TEST(Controller, MigChangesGoToTheAgentAndItsReportsUpdateTheNode) {
  Harness h;
  h.Attach({MakeMigNode("h1", "H100-80GB", 1, {0}, {})});
  std::string first = h.Submit("{mig_profile: 3g.40gb, command: 'true'}", kAlice).body["id"];
  h.controller->Sync();
  StartOrder order;
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.starts.size(), 1u);
    order = h.link.starts[0];
  }
  ASSERT_EQ(order.mig.size(), 1u);
  EXPECT_EQ(order.mig[0].gpu_uuid, order.gpus[0].uuid);
  ASSERT_EQ(order.mig[0].create.size(), 1u);
  EXPECT_EQ(order.mig[0].create[0].profile, "3g.40gb");
  EXPECT_EQ(order.mig[0].create[0].start, order.gpus[0].mig_start);
  EXPECT_EQ(order.gpus[0].mig_uuid, "");  // not made yet
  int start = order.gpus[0].mig_start;
  h.controller->MigChanged({"h1", 0, {{"MIG-made-1", "3g.40gb", 1, 0, start}}, first, ""});
  h.controller->RunExited(ExitReport(first, 1, "h1", 0, ""));
  h.controller->Sync();
  nlohmann::json gpu = Api(h.controller->Nodes(kAdmin)).body["nodes"][0]["gpus"][0];
  ASSERT_EQ(gpu["mig_instances"].size(), 1u) << gpu.dump();
  EXPECT_EQ(gpu["mig_instances"][0]["uuid"], "MIG-made-1");

  // The next 3g.40gb job reuses the named instance: no change, and its device in the order.
  std::string second = h.Submit("{mig_profile: 3g.40gb, command: 'true'}", kAlice).body["id"];
  h.controller->Sync();
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.starts.size(), 2u);
    EXPECT_TRUE(h.link.starts[1].mig.empty());
    EXPECT_EQ(h.link.starts[1].gpus[0].mig_uuid, "MIG-made-1");
  }
  h.controller->RunExited(ExitReport(second, 1, "h1", 0, ""));

  // A 7g.80gb needs the GPU re-partitioned; the agent fails (a process it did not expect).
  std::string big = h.Submit("{mig_profile: 7g.80gb, command: 'true'}", kAlice).body["id"];
  h.controller->Sync();
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.starts.size(), 3u);
    ASSERT_EQ(h.link.starts[2].mig.size(), 1u);
    EXPECT_EQ(h.link.starts[2].mig[0].destroy.size(), 1u);
  }
  h.controller->MigChanged({"h1", 0, {{"MIG-made-1", "3g.40gb", 1, 0, start}}, big, "process 9 runs on the GPU"});
  h.controller->RunExited(ExitReport(big, 1, "h1", 125, "MIG re-partition failed: process 9 runs on the GPU"));
  h.controller->Sync();
  // The node's history names the job and what failed to its team and admins; to another
  // team, neither.
  auto failed_change = [&](const Actor& who) {
    ApiAnswer history = Api(h.controller->NodeHistory(who, "h1", 100));
    EXPECT_EQ(history.status, 200) << history.body.dump();
    for (const auto& e : history.body["events"]) {
      if (e["kind"] == "mig_failed") return e["detail"];
    }
    return nlohmann::json();
  };
  EXPECT_EQ(failed_change(kAlice).value("job", ""), big);
  EXPECT_EQ(failed_change(kAdmin).value("error", ""), "process 9 runs on the GPU");
  nlohmann::json seen_by_bob = failed_change(kBob);
  ASSERT_TRUE(seen_by_bob.is_object());
  EXPECT_FALSE(seen_by_bob.contains("job")) << seen_by_bob.dump();
  EXPECT_FALSE(seen_by_bob.contains("error")) << seen_by_bob.dump();
  // Requeued as a fault (not failed) and started again with the same re-partition planned
  // against the GPU as the agent reported it.
  nlohmann::json job = Api(h.controller->GetJob(kAlice, big)).body;
  EXPECT_EQ(job["state"], "running") << job.dump();
  EXPECT_EQ(job["runs"], 2) << job.dump();
  std::lock_guard<std::mutex> lock(h.link.mu);
  ASSERT_EQ(h.link.starts.size(), 4u);
  ASSERT_EQ(h.link.starts[3].mig.size(), 1u);
  ASSERT_EQ(h.link.starts[3].mig[0].destroy.size(), 1u);
  EXPECT_EQ(h.link.starts[3].mig[0].destroy[0].start, start);
}

}  // namespace
}  // namespace gantry::testing
