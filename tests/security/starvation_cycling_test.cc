// A hostile tenant against the starvation guard: once its team has had jobs waiting and no
// GPU past the bound, its job's rescue evicts another team's work. Cancelling that job
// before it starts and submitting another must not evict again at once (it would evict a
// job every grace period while the team holds nothing): the withdrawn rescue restarts the
// team's clock, so the next rescue needs another whole bound (TeamClocks' own test shows
// the clock restarting).
#include <gtest/gtest.h>

#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

TEST(StarvationCycling, CancellingARescuedJobDoesNotOpenAnotherRescueWithinTheBound) {
  Harness h;  // no quota file: every team's guarantee is 0, so all held GPUs are borrowed
  h.Attach({MakeNode("n1", "A100-80GB", 4)});
  for (int i = 0; i < 4; ++i) h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice);
  // Bob's team keeps a larger job waiting (its clock runs on), and a 1-GPU one, the rescue's.
  std::string big = h.Submit("{gpus: 2, command: 'true'}", kBob).body["id"];
  std::string first = h.Submit("{gpus: 1, command: 'true'}", kBob).body["id"];
  h.now += 46 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice);  // any change runs a cycle
  h.controller->Sync();
  ASSERT_EQ(h.link.stops.size(), 1u) << "the rescue";

  // Bob cancels the rescued job while its victim stops, and submits another at once.
  EXPECT_EQ(Api(h.controller->Cancel(kBob, first)).body["state"], "cancelled");
  std::string second = h.Submit("{gpus: 1, command: 'true'}", kBob).body["id"];
  h.controller->Sync();
  EXPECT_EQ(h.link.stops.size(), 1u) << "no second eviction for the same starvation";
  h.now += 10 * kMinuteMs;
  h.Submit("{gpus: 1, command: 'sleep 100000'}", kAlice);
  h.controller->Sync();
  EXPECT_EQ(h.link.stops.size(), 1u) << "nor within the bound of the cancel";
  EXPECT_EQ(h.State(second, kBob), "pending");
  EXPECT_EQ(h.State(big, kBob), "pending");
}

}  // namespace
}  // namespace gantry::testing
