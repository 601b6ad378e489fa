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
