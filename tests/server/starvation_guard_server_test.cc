// The starvation guard in the live server: the controller tracks since when each team has
// had jobs waiting and no GPU, and past the bound the engine's rescue evicts borrowed
// work for that team's job and says so in the queue.
#include <gtest/gtest.h>

#include "controller_harness.h"

namespace gantry::testing {
namespace {

TEST(StarvationGuardServer, AStarvingTeamsJobEvictsBorrowedWorkPastTheBound) {
  Harness h;  // no quota file: every team's guarantee is 0, so all held GPUs are borrowed
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  std::vector<std::string> alices;
  for (int i = 0; i < 2; ++i) alices.push_back(h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice).body["id"]);
  std::string bobs = h.Submit("{name: nlp-eval, gpus: 1, command: 'true'}", kBob).body["id"];
  EXPECT_EQ(h.State(bobs, kBob), "pending");

  // 30 minutes on: under the bound, nothing is evicted.
  h.now += 30 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'true'}", kAlice);  // any change runs a cycle
  h.controller->Sync();
  EXPECT_TRUE(h.link.stops.empty());

  // 46 minutes on: bob's team has had a job waiting and no GPU past the 45 min bound.
  h.now += 16 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'true'}", kAlice);
  h.controller->Sync();
  ASSERT_EQ(h.link.stops.size(), 1u);
  EXPECT_NE(std::find(alices.begin(), alices.end(), h.link.stops[0].job_id), alices.end());
  EXPECT_EQ(h.link.stops[0].grace_ms, 120000);
  nlohmann::json q = Api(h.controller->Queue(kBob)).body["queue"];
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(q[0]["id"], bobs);  // first in line, waiting for the victim's GPU
  EXPECT_NE(q[0]["reason"].get<std::string>().find("first in line: team nlp has had jobs waiting and no GPU for 46m"),
            std::string::npos)
      << q[0].dump();
  // The victim's run ends; bob's job starts on its GPU.
  h.controller->RunExited(ExitReport(h.link.stops[0].job_id, 1, "n1", 143, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(bobs, kBob), "running");
}

// A team missing from the quota file gets default_team's guarantee: the controller tracks
// its time below it like a listed team's, so it reclaims after reclaim_after (30 min; the
// borrowed jobs would not end within its patience), with the starvation guard off.
TEST(DefaultTeamServer, AnUnlistedTeamReclaimsItsDefaultGuarantee) {
  Harness h("", 3600'000, [](ControllerOptions& o) {
    o.config.scheduler.starvation_bound_ms = 0;
    auto q = QuotaConfig::FromYaml("default_team: {guaranteed: {any: 1}}\nteams:\n  vision: {guaranteed: {any: 0}}\n",
                                   o.config.catalog);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    o.config.quotas = *q;
  });
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  for (int i = 0; i < 2; ++i) h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice);  // vision: all borrowed
  std::string bobs = h.Submit("{gpus: 1, command: 'true'}", kBob).body["id"];          // nlp: not listed
  h.now += 25 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'true'}", kAlice);
  h.controller->Sync();
  EXPECT_TRUE(h.link.stops.empty());  // below its guarantee for less than reclaim_after
  h.now += 10 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'true'}", kAlice);
  h.controller->Sync();
  ASSERT_EQ(h.link.stops.size(), 1u);
  EXPECT_EQ(Api(h.controller->Queue(kBob)).body["queue"][0]["id"], bobs);
}

// The queue's guarantee term follows a team crossing its guarantee at once, not at the
// next 5-minute recalculation. nlp (bob, guarantee 1) holds its guarantee when the queue
// is keyed at 6 min; its job ends, and the freed GPU goes to vision's a2 (nlp has nothing
// waiting). At 8 min bob submits again: nlp is below its guarantee from then on. At 9 min
// a vision job ends: bob's job takes its GPU, ahead of vision's older a3. Keyed with the
// tiers of 6 min, a3 took it.
TEST(GuaranteeTierServer, ATeamThatFallsBelowItsGuaranteeIsFirstForTheNextFreeGpu) {
  Harness h("", 3600'000, [](ControllerOptions& o) {
    o.config.scheduler.fairshare_weight = 0;  // the guarantee term alone decides
    auto q = QuotaConfig::FromYaml("teams:\n  nlp: {guaranteed: {any: 1}}\n", o.config.catalog);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    o.config.quotas = *q;
  });
  h.Attach({MakeNode("n1", "A100-80GB", 2)});
  std::string b0 = h.Submit("{gpus: 1, command: 'sleep 100000'}", kBob).body["id"];
  std::string a1 = h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice).body["id"];
  std::string a2 = h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice).body["id"];
  std::string a3 = h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice).body["id"];
  h.now += 6 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'true'}", kAlice);  // a cycle, with the periodic reorder
  h.controller->Sync();
  h.now += kMinuteMs;
  h.controller->RunExited(ExitReport(b0, 1, "n1", 0, ""));
  h.controller->Sync();
  ASSERT_EQ(h.State(a2, kAlice), "running");
  h.now += kMinuteMs;
  std::string b1 = h.Submit("{gpus: 1, command: 'sleep 100000'}", kBob).body["id"];
  h.controller->Sync();
  h.now += kMinuteMs;
  h.controller->RunExited(ExitReport(a1, 1, "n1", 0, ""));
  h.controller->Sync();
  EXPECT_EQ(h.State(b1, kBob), "running");
  EXPECT_EQ(h.State(a3, kAlice), "pending");
}

}  // namespace
}  // namespace gantry::testing
