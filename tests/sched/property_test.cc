// Properties over random clusters and queues (seeded, so failures replay): no GPU is
// over-allocated (exclusive, fractions, MPS threads and memory, CPUs, host memory), every
// MIG layout is valid for its model, no gang is partly placed, backfill never delays a
// reservation, and identical input gives an identical plan.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "sched/apply_plan.h"
#include "sched/plan_output.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

const char* kTypes[] = {"A100-80GB", "H100-80GB", "T4", "A100-40GB"};

Snapshot RandomCluster(std::mt19937& rng) {
  Snapshot snap;
  int nodes = std::uniform_int_distribution<>(1, 12)(rng);
  for (int i = 0; i < nodes; ++i) {
    std::string type = kTypes[rng() % 4];
    int gpus = std::uniform_int_distribution<>(1, 8)(rng);
    int groups = gpus % 2 == 0 && rng() % 2 ? 2 : 1;
    Node n = MakeNode("n" + std::to_string(i), type, gpus, groups);
    n.cpus = std::uniform_int_distribution<>(8, 64)(rng);
    const GpuType& t = *Catalog().Find(type);
    for (Gpu& g : n.gpus) {
      if (rng() % 10 == 0) g.health = GpuHealth::kUnhealthy;
      if (t.supports_mig() && rng() % 3 == 0) {
        g.mig_enabled = true;
        std::vector<MigPlacement> layout;
        for (int k = 0; k < 4; ++k) {
          int p = static_cast<int>(rng() % t.mig_profiles.size());
          if (auto start = FindMigStart(t, layout, p)) layout.push_back({p, *start});
        }
        for (const MigPlacement& p : layout) g.mig_instances.push_back({p, ""});
      }
    }
    if (rng() % 8 == 0) n.state = NodeState::kDrained;
    n.mps = rng() % 4 != 0;
    snap.nodes.push_back(std::move(n));
  }
  return snap;
}

JobSpec RandomJob(std::mt19937& rng, int id) {
  MakeJob j("j" + std::to_string(id));
  static const char* kClasses[] = {"critical", "high", "medium", "low"};
  j.Class(kClasses[rng() % 4]).Cpus(static_cast<int>(rng() % 9));
  j.Estimate((1 + rng() % 240) * kMinuteMs);
  switch (rng() % 6) {
    case 0: j.Fraction((1 + rng() % 8) / 8.0, rng() % 2 ? SharingMode::kTimeSlice : SharingMode::kAuto); break;
    case 1: j.Mps((1 + rng() % 4) / 8.0, rng() % 2 ? 4096 : 0); break;
    case 2: {
      static const char* kProfiles[] = {"1g.10gb", "3g.40gb", "7g.80gb", "1g.5gb", "3g.20gb", "2g.20gb"};
      j.Mig(kProfiles[rng() % 6]);
      break;
    }
    case 3: j.Gpus(static_cast<int>(2 * (1 + rng() % 8))); break;  // may need a gang
    default: j.Gpus(static_cast<int>(1 + rng() % 4));
  }
  if (rng() % 3 == 0) j.Types({kTypes[rng() % 4]});
  return j;
}

void ExpectNoOverAllocation(const Snapshot& snap, const SharingConfig& sharing) {
  struct Use {
    int exclusive = 0, ts = 0, mps = 0, mps_clients = 0, ts_milli = 0, mps_pct = 0;
    int64_t memory = 0;
    std::map<std::pair<int, int>, int> mig;  // (profile, start) -> jobs
  };
  std::map<std::pair<int, int>, Use> use;
  std::map<int, int> cpus;
  for (const RunningJob& r : snap.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      cpus[ns.node] += ns.cpus;
      for (const GpuShare& g : ns.gpus) {
        Use& u = use[{ns.node, g.gpu}];
        const Gpu& gpu = snap.nodes[ns.node].gpus[g.gpu];
        const SharingMode held = HeldSharing(*r.spec, r.placement);
        if (held == SharingMode::kMps) {
          EXPECT_TRUE(snap.nodes[ns.node].mps) << r.spec->id << " got MPS on a node without MPS";
        }
        switch (held) {
          case SharingMode::kAuto: ADD_FAILURE() << r.spec->id << " placed with mode auto"; break;
          case SharingMode::kExclusive: u.exclusive++; break;
          case SharingMode::kTimeSlice:
            u.ts++;
            u.ts_milli += g.milli;
            u.memory += g.memory_mib;
            break;
          case SharingMode::kMps:
            u.mps++;
            u.mps_pct += g.mps_thread_percent;
            u.memory += g.memory_mib;
            break;
          case SharingMode::kMig: {
            u.mig[{g.mig_profile, g.mig_start}]++;
            bool exists = false;
            for (const MigInstance& m : gpu.mig_instances)
              exists |= m.placement == MigPlacement{g.mig_profile, g.mig_start};
            EXPECT_TRUE(exists) << r.spec->id << " on a MIG instance that does not exist";
            break;
          }
        }
        if (r.spec->request.sharing != SharingMode::kMig) {
          EXPECT_FALSE(gpu.mig_enabled) << r.spec->id;
        }
      }
    }
  }
  for (const auto& [where, u] : use) {
    const Gpu& gpu = snap.nodes[where.first].gpus[where.second];
    int modes = (u.exclusive > 0) + (u.ts > 0) + (u.mps > 0) + !u.mig.empty();
    EXPECT_LE(modes, 1) << "modes mixed on " << where.first << ":" << where.second;
    EXPECT_LE(u.exclusive, 1);
    EXPECT_LE(u.ts_milli, 1000);
    if (!sharing.time_slice_packing) {
      EXPECT_LE(u.ts, 1) << "time-sliced jobs packed on " << where.first;
    }
    EXPECT_LE(u.mps_pct, 100);
    EXPECT_LE(u.memory, Catalog().Get(gpu.type).memory_mib);
    for (const auto& [inst, jobs] : u.mig) EXPECT_EQ(jobs, 1) << "two jobs on one MIG instance";
  }
  for (const auto& [node, used] : cpus) EXPECT_LE(used, snap.nodes[node].cpus);
  for (const Node& n : snap.nodes) {
    for (const Gpu& g : n.gpus) {
      if (!g.mig_enabled) continue;
      std::vector<MigPlacement> layout;
      for (const MigInstance& m : g.mig_instances) layout.push_back(m.placement);
      std::string why;
      EXPECT_TRUE(MigLayoutValid(Catalog().Get(g.type), layout, &why)) << n.id << ":" << g.index << " " << why;
    }
  }
}

void ExpectWholeGangs(const Snapshot& before, const Plan& plan) {
  for (const StartDecision& s : plan.starts) {
    const JobSpec& spec = *before.pending[s.pending_index].spec;
    if (spec.request.sharing != SharingMode::kExclusive) {
      EXPECT_EQ(s.placement.gpu_count(), 1);
      continue;
    }
    EXPECT_EQ(s.placement.gpu_count(), spec.request.gpus) << spec.id << " partly placed";
    std::set<int> nodes;
    std::set<GpuTypeId> types;
    for (const NodeShare& ns : s.placement.nodes) {
      nodes.insert(ns.node);
      types.insert(before.nodes[ns.node].gpu_type());
      EXPECT_EQ(ns.gpus.size(), s.placement.nodes[0].gpus.size()) << spec.id << " uneven gang";
      EXPECT_TRUE(before.nodes[ns.node].schedulable()) << spec.id << " on a drained node";
      for (const GpuShare& g : ns.gpus) {
        EXPECT_EQ(before.nodes[ns.node].gpus[g.gpu].health, GpuHealth::kHealthy) << spec.id << " on a sick GPU";
      }
    }
    EXPECT_EQ(nodes.size(), s.placement.nodes.size());
    EXPECT_EQ(types.size(), 1u) << spec.id << " gang spans GPU types";
  }
}

// No job that runs after the cycle and would still run at a reservation's start holds
// one of its GPUs.
void ExpectReservationsKept(const Snapshot& after, const Plan& plan) {
  for (const Reservation& res : plan.reservations) {
    for (const RunningJob& r : after.running) {
      if (ExpectedEnd(r, after.now_ms) <= res.start_ms) continue;
      for (const NodeShare& rn : r.placement.nodes) {
        for (const NodeShare& hn : res.placement.nodes) {
          if (rn.node != hn.node) continue;
          for (const GpuShare& a : rn.gpus) {
            for (const GpuShare& b : hn.gpus) {
              EXPECT_NE(a.gpu, b.gpu) << r.spec->id << " delays the reservation of " << res.job_id;
            }
          }
        }
      }
    }
  }
}

// Every victim is preemptible, of a preemptible class, ran its minimum run time and was
// evicted fewer than the maximum times; each is evicted once.
void ExpectFairEvictions(const Snapshot& before, const Plan& plan, const SchedulerConfig& config) {
  std::set<size_t> seen;
  for (const Preemption& p : plan.preemptions) {
    const RunningJob& r = before.running[p.running_index];
    EXPECT_TRUE(seen.insert(p.running_index).second) << r.spec->id << " evicted twice";
    EXPECT_TRUE(r.spec->preemptible) << r.spec->id;
    EXPECT_NE(r.spec->priority_class, "critical") << r.spec->id;
    EXPECT_GE(before.now_ms - r.start_ms, config.min_runtime_ms) << r.spec->id;
    EXPECT_LT(r.evictions, config.max_evictions) << r.spec->id;
    EXPECT_EQ(r.stop_at_ms, kNever) << r.spec->id << " was already stopping";
    EXPECT_EQ(p.stop_at_ms, before.now_ms + config.grace_period_ms);
  }
}

TEST(Properties, RandomClustersAndQueues) {
  int total_preemptions = 0, total_starts = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    Snapshot snap = RandomCluster(rng);
    int id = 0;
    for (int wave = 0; wave < 4; ++wave) {
      snap.now_ms = wave * 30 * kMinuteMs;
      std::erase_if(snap.running,
                    [&](const RunningJob& r) { return r.start_ms + r.spec->estimated_duration_ms <= snap.now_ms; });
      RequeueStopped(snap);
      int jobs = std::uniform_int_distribution<>(0, 25)(rng);
      for (int i = 0; i < jobs; ++i) snap.pending.push_back(Pending(RandomJob(rng, id++), snap.now_ms));
      SchedulerConfig config = SchedulerConfig::Builtin();  // every policy on, preemption included
      config.backfill_reservations = static_cast<int>(rng() % 3);
      config.strategy = rng() % 2 ? PlacementStrategy::kPack : PlacementStrategy::kSpread;
      config.sharing.time_slice_packing = seed % 2 == 0;  // one setting through the waves
      Plan plan = Schedule(snap, config);
      Plan again = Schedule(snap, config);
      total_preemptions += static_cast<int>(plan.preemptions.size());
      total_starts += static_cast<int>(plan.starts.size());
      ASSERT_EQ(PlanToJson(plan, snap, Catalog()).dump(), PlanToJson(again, snap, Catalog()).dump());
      ExpectWholeGangs(snap, plan);
      ExpectFairEvictions(snap, plan, config);
      EXPECT_EQ(plan.starts.size() + plan.waiting.size(), snap.pending.size());
      ApplyPlan(plan, snap);
      ExpectNoOverAllocation(snap, config.sharing);
      ExpectReservationsKept(snap, plan);
      if (::testing::Test::HasFailure()) return;
    }
  }
  // The random workloads exercise what the properties guard.
  EXPECT_GT(total_starts, 1000);
  EXPECT_GT(total_preemptions, 10);
}

}  // namespace
}  // namespace gantry
