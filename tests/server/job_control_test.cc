// Controller: the checkpoint-done call, the GPU memory watch of time-sliced jobs, and
// per-team program allow-lists; with a recording agent link and a hand-moved clock.
#include <gtest/gtest.h>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

TEST(CheckpointDone, EndsTheGracePeriodOfAStoppingJobAtOnce) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  std::string victim = h.Submit("{gpus: 4, priority: low, command: 'sleep 1000'}", kAlice).body["id"];
  ApiAnswer early = Api(h.controller->CheckpointDone(kAlice, victim));
  EXPECT_EQ(early.status, 409);  // running, not stopping: nothing waits for a checkpoint
  EXPECT_EQ(early.body["error"]["field"], "id");
  h.now += 11 * kMinuteMs;
  h.Submit("{gpus: 4, priority: critical, command: 'true'}", kBob);
  h.controller->Sync();
  ASSERT_EQ(h.State(victim, kAlice), "stopping");
  EXPECT_EQ(Api(h.controller->CheckpointDone(kBob, victim)).status, 404);  // another team's job
  ApiAnswer done = Api(h.controller->CheckpointDone(kAlice, victim));
  ASSERT_EQ(done.status, 200) << done.body.dump();
  h.controller->Sync();
  std::lock_guard<std::mutex> lock(h.link.mu);
  ASSERT_EQ(h.link.stops.size(), 2u);
  EXPECT_EQ(h.link.stops[0].grace_ms, 120000);  // the preemption
  EXPECT_EQ(h.link.stops[1].grace_ms, 0);       // killed now
  EXPECT_EQ(h.link.stops[1].job_id, victim);
}

TEST(GpuMemoryWatch, ATimeSlicedJobOverItsShareIsStoppedAndItsNeighbourIsNot) {
  Harness h("", 3600 * 1000, [](ControllerOptions& o) { o.config.scheduler.sharing.time_slice_packing = true; });
  h.Attach({MakeNode("n1", "A100-80GB", 1)});
  std::string greedy = h.Submit("{gpu_fraction: 0.25, sharing: time-slice, command: 'sleep 1000'}", kAlice).body["id"];
  std::string polite = h.Submit("{gpu_fraction: 0.5, sharing: time-slice, command: 'sleep 1000'}", kBob).body["id"];
  h.controller->Sync();
  GpuSample s;
  s.util_pct = 80;
  s.processes = {{101, 30000, -1, -1, greedy}, {102, 30000, -1, -1, polite}};  // share: 20,480 and 40,960 MiB
  h.controller->Readings({"n1", {{0, s}}});
  h.controller->Sync();
  EXPECT_EQ(h.State(greedy, kAlice), "stopping");
  EXPECT_EQ(h.State(polite, kBob), "running");
  {
    std::lock_guard<std::mutex> lock(h.link.mu);
    ASSERT_EQ(h.link.stops.size(), 1u);
    EXPECT_EQ(h.link.stops[0].grace_ms, 0);
  }
  h.controller->RunExited(ExitReport(greedy, 1, "n1", 137, ""));
  h.controller->Sync();
  ApiAnswer job = Api(h.controller->GetJob(kAlice, greedy));
  EXPECT_EQ(job.body["state"], "failed");
  EXPECT_NE(job.body["reason"].get<std::string>().find("used 30000 MiB of GPU memory on n1 GPU 0, over its share "
                                                       "of 20480 MiB"),
            std::string::npos)
      << job.body.dump();
}

TEST(MpsFault, AnXidUnderMpsRequeuesEveryClientAndHoldsTheGpuUntilTheyAreGone) {
  Harness h;
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  std::string a = h.Submit("{gpu_fraction: 0.25, command: 'sleep 1000'}", kAlice).body["id"];
  std::string b = h.Submit("{gpu_fraction: 0.25, command: 'sleep 1000'}", kBob).body["id"];
  std::string whole = h.Submit("{gpus: 1, command: 'sleep 1000'}", kBob).body["id"];
  h.controller->Sync();
  ASSERT_EQ(Api(h.controller->GetJob(kAlice, a)).body["sharing"], "mps");
  int mps_gpu = Api(h.controller->GetJob(kAlice, a)).body["placement"][0]["gpus"][0]["index"];
  auto reading = [&](int gpu, int64_t xids, int last_xid) {
    GpuSample s;
    s.util_pct = 50;
    s.xid_events = xids;
    s.last_xid = last_xid;
    h.controller->Readings({"n1", {{gpu, s}}});
    h.controller->Sync();
  };
  reading(mps_gpu, 0, 0);
  reading(1 - mps_gpu, 0, 0);
  reading(1 - mps_gpu, 1, 13);  // a fault beside no MPS job: that job's own business
  EXPECT_EQ(h.State(whole, kBob), "running");
  reading(mps_gpu, 1, 13);  // XID 13 on the MPS GPU: both clients got it
  EXPECT_EQ(h.State(a, kAlice), "stopping");
  EXPECT_EQ(h.State(b, kBob), "stopping");
  EXPECT_NE(Api(h.controller->GetJob(kAlice, a)).body["reason"].get<std::string>().find("XID 13 on n1 GPU"),
            std::string::npos);
  // Held back until its clients are gone: a new MPS job waits though the GPU has room.
  std::string c = h.Submit("{gpu_fraction: 0.25, command: 'sleep 1000'}", kAlice).body["id"];
  h.controller->Sync();
  EXPECT_EQ(h.State(c, kAlice), "pending");
  h.controller->RunExited(ExitReport(a, 1, "n1", 1, "CUDA error"));
  h.controller->RunExited(ExitReport(b, 1, "n1", 1, "CUDA error"));
  h.controller->Sync();
  // Requeued as a fault (not their failure), and started again with c on a fresh server.
  for (const auto& [id, who] : {std::pair{a, kAlice}, std::pair{b, kBob}, std::pair{c, kAlice}}) {
    EXPECT_EQ(h.State(id, who), "running") << id;
  }
  EXPECT_EQ(Api(h.controller->GetJob(kAlice, a)).body["runs"], 2);
}

TEST(AllowedExecutables, OnlyListedProgramsAsOneSimpleCommand) {
  auto configure = [](ControllerOptions& o) {
    auto q = QuotaConfig::FromYaml(
        "teams: {vision: {allowed_executables: [/usr/bin/python3, /opt/conda/envs/*/bin/*]}}", o.config.catalog);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    o.config.quotas = *q;
  };
  Harness h("", 3600 * 1000, configure);
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  EXPECT_EQ(h.Submit("{gpus: 1, command: '/usr/bin/python3 train.py --data *.csv'}", kAlice).status, 201);
  EXPECT_EQ(h.Submit("{gpus: 1, command: '/opt/conda/envs/torch/bin/torchrun x.py'}", kAlice).status, 201);
  for (const char* bad : {"{gpus: 1, command: 'bash -c id'}", "{gpus: 1, command: '/usr/bin/python3 x.py; id'}",
                          "{gpus: 1, command: '/usr/bin/python3 $(id)'}",
                          "{gpus: 1, command: '/opt/conda/envs/torch/bin/../../../../bin/sh'}"}) {
    ApiAnswer r = h.Submit(bad, kAlice);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.body["error"]["field"], "command") << r.body.dump();
  }
  EXPECT_EQ(h.Submit("{gpus: 1, command: 'bash -c id'}", kBob).status, 201);  // nlp has no list
}

}  // namespace
}  // namespace gantry::testing
