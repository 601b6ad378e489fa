// The queue's reasons say when a job's GPU types are scarcer than what is asked of them
// (sched/scarcity.h). Working that out reads every distinct list of types waiting jobs may
// use, once per shape: a tenant that floods the queue with jobs naming thousands of
// different type lists must not make every explained cycle (the queue's views) quadratic.
// Past TypeScarcity::kMostTypeSets lists no note is given, and at most 256 shapes a cycle
// are looked at; the jobs still wait with their other reasons.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/engine.h"
#include "sched/scarcity.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

constexpr int kTypes = 13;  // 8,191 distinct non-empty lists of them

// A site's catalog of kTypes models, X0 to X12 (the built-in one has 10).
const GpuCatalog& SiteCatalog() {
  static const GpuCatalog catalog = [] {
    std::string yaml = "gpu_types:\n";
    for (int t = 0; t < kTypes; ++t)
      yaml += "  X" + std::to_string(t) + ": {memory_gb: 80, relative_speed: 1, price_on_demand: 2}\n";
    auto c = GpuCatalog::FromYaml(yaml);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }();
  return catalog;
}

std::vector<std::string> TypeList(size_t bits) {
  std::vector<std::string> names;
  for (int t = 0; t < kTypes; ++t) {
    if (bits >> t & 1) names.push_back("X" + std::to_string(t));
  }
  return names;
}

TEST(QueueReasonFlood, PastTheMostTypeListsNoNoteIsWorkedOut) {
  const std::vector<int> capacity(Catalog().size(), 8);
  const std::vector<double> running(Catalog().size(), 8.0);
  TypeScarcity few(Catalog(), capacity, running);
  few.AddWaiting(1, 4);
  EXPECT_NE(few.Note(1).find("scarcer than its demand: 8 GPUs in the cluster, 12 asked"), std::string::npos)
      << few.Note(1);
  TypeScarcity flooded(Catalog(), capacity, running);
  for (uint64_t mask = 1; mask <= TypeScarcity::kMostTypeSets + 1; ++mask) flooded.AddWaiting(mask, 1);
  EXPECT_EQ(flooded.Note(1), "") << "past the most type lists, no note";
}

// One full 8-GPU node of each type (a job's list counts only the types the cluster has);
// `jobs` waiting jobs, each naming its own list.
Plan ExplainedQueue(size_t jobs) {
  Snapshot snap;
  snap.now_ms = kHourMs;
  for (int t = 0; t < kTypes; ++t) {
    Node node = MakeNode("n" + std::to_string(t), "A100-80GB", 8);
    for (Gpu& g : node.gpus) g.type = SiteCatalog().Find("X" + std::to_string(t))->id;
    snap.nodes.push_back(std::move(node));
    snap.running.push_back(
        Running(MakeJob("holder-" + std::to_string(t)).Team("a").Gpus(8).Estimate(72 * kHourMs).Limit(96 * kHourMs), t,
                {0, 1, 2, 3, 4, 5, 6, 7}));
  }
  for (size_t i = 1; i <= jobs; ++i) {
    snap.pending.push_back(Pending(MakeJob("j" + std::to_string(i)).Team("flood").Types(TypeList(i)), 0));
  }
  return Engine(SiteCatalog(), MechanismConfig(), nullptr).Schedule(snap, {.explain = true});
}

size_t Notes(const Plan& plan) {
  size_t notes = 0;
  for (const WaitingJob& w : plan.waiting) notes += plan.reason(w).find("scarcer") != std::string::npos;
  return notes;
}

TEST(QueueReasonFlood, AQueueOfThousandsOfTypeListsIsExplainedWithoutNotes) {
  Plan few = ExplainedQueue(100);
  EXPECT_EQ(few.waiting.size(), 100u);
  EXPECT_GT(Notes(few), 0u) << "a list with the node's type is scarcer than its demand";
  Plan flood = ExplainedQueue(5000);
  EXPECT_EQ(flood.waiting.size(), 5000u);
  EXPECT_EQ(Notes(flood), 0u);
}

// Another team's jobs that differ from the victim's only in fields other than the type list
// (here CPUs: 900 shapes of one list) share the victim's note; they cannot use up the notes a
// cycle works out and so hide it.
TEST(QueueReasonFlood, ShapesOfOneTypeListShareOneNote) {
  Snapshot snap;
  snap.now_ms = kHourMs;
  snap.nodes = {MakeNode("h", "H100-80GB", 8)};
  snap.nodes[0].cpus = 4096;  // room for every job's CPUs
  snap.running = {Running(MakeJob("holder").Team("a").Gpus(8).Estimate(72 * kHourMs).Limit(96 * kHourMs), 0,
                          {0, 1, 2, 3, 4, 5, 6, 7})};
  for (int i = 1; i <= 900; ++i) {  // within backfill.depth (1,000), past the old 256 notes
    JobSpec flood = MakeJob("f" + std::to_string(i)).Team("flood").Types({"H100-80GB"});
    flood.request.cpus = i;
    snap.pending.push_back(Pending(flood, 0));
  }
  snap.pending.push_back(Pending(MakeJob("victim").Team("b").Types({"H100-80GB"}), kMinuteMs));
  Plan plan = Engine(Catalog(), MechanismConfig(), nullptr).Schedule(snap, {.explain = true});
  const WaitingJob* victim = FindWaiting(plan, "victim");
  ASSERT_NE(victim, nullptr);
  EXPECT_NE(plan.reason(*victim).find("H100-80GB is scarcer than its demand"), std::string::npos)
      << plan.reason(*victim);
}

}  // namespace
}  // namespace gantry
