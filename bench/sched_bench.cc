// Scheduling engine benchmarks (Google Benchmark). Figures and the machine they ran on
// are in docs/BENCHMARKS.md.
//   BM_FullCycle/<nodes>/<pending>: one Engine::Schedule() on a full cluster of 8-GPU
//     nodes (mixed types, some GPUs in MIG mode) with a mixed pending queue (0.5, 1, 2,
//     4, 8 GPUs, 2-16-node gangs, MIG profiles, several types).
//   BM_PlaceOne/<nodes>: one placement decision for a new job in a cluster with room.
//   BM_PendingJobMemory: heap bytes per queued job, counted with mallinfo2().
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <random>

#include "sched/cluster_state.h"
#include "sched/demand.h"
#include "sched/engine.h"
#include "sched/placer.h"

namespace gantry {
namespace {

const GpuCatalog& Cat() { return GpuCatalog::Builtin(); }
const char* kTypes[] = {"A100-80GB", "H100-80GB", "L40S", "A100-40GB"};

// Nodes of 8 GPUs, types in rotation; on every A100-40GB node GPUs 6 and 7 are in MIG mode.
std::vector<Node> MakeNodes(int count) {
  std::vector<Node> nodes;
  nodes.reserve(count);
  for (int i = 0; i < count; ++i) {
    Node n;
    n.id = "node-" + std::to_string(i);
    n.cpus = 128;
    n.memory_mib = 1024 * 1024;
    const GpuType& t = *Cat().Find(kTypes[i % 4]);
    for (int g = 0; g < 8; ++g) {
      Gpu gpu;
      gpu.index = g;
      gpu.type = t.id;
      gpu.uuid = n.id + "-" + std::to_string(g);
      gpu.nvlink_group = g / 4;
      if (t.supports_mig() && g >= 6) {
        gpu.mig_enabled = true;
        gpu.mig_instances = {{{t.FindMigProfile("3g.20gb"), 0}, ""}, {{t.FindMigProfile("3g.20gb"), 4}, ""}};
      }
      n.gpus.push_back(gpu);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

JobSpec MixedJob(std::mt19937& rng, int id) {
  JobSpec j;
  j.id = "job-" + std::to_string(id);
  j.user = "user" + std::to_string(rng() % 200);
  j.team = "team" + std::to_string(rng() % 8);
  j.project = "p" + std::to_string(rng() % 30);
  static const char* kClasses[] = {"high", "medium", "medium", "low"};
  j.priority_class = kClasses[rng() % 4];
  j.time_limit_ms = 24 * kHourMs;
  j.estimated_duration_ms = (1 + rng() % 48) * 30 * kMinuteMs;
  GpuRequest& r = j.request;
  r.cpus = 4;
  switch (rng() % 10) {
    case 0: r.sharing = SharingMode::kTimeSlice, r.gpu_milli = 500; break;
    case 1: r.sharing = SharingMode::kMig, r.mig_profile = "3g.20gb"; break;
    case 2: r.gpus = 8 * (2 + static_cast<int>(rng() % 15)), r.num_nodes = r.gpus / 8; break;  // 2-16 node gang
    case 3: r.gpus = 8; break;
    case 4: r.gpus = 4; break;
    case 5: r.gpus = 2; break;
    default: r.gpus = 1;
  }
  if (rng() % 2) r.gpu_types = {kTypes[rng() % 3]};
  return j;
}

// A full cluster: every non-MIG GPU held by a 1-GPU job, every MIG instance busy.
std::vector<RunningJob> FillCluster(const std::vector<Node>& nodes) {
  std::vector<RunningJob> running;
  int id = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const Gpu& g : nodes[n].gpus) {
      if (g.mig_enabled) {
        for (const MigInstance& m : g.mig_instances) {
          RunningJob r;
          auto spec = std::make_shared<JobSpec>();
          spec->id = "run-" + std::to_string(id++);
          spec->request.sharing = SharingMode::kMig;
          spec->estimated_duration_ms = (1 + id % 20) * kHourMs;
          r.spec = spec;
          r.placement.nodes.push_back(
              {static_cast<int>(n),
               {{.gpu = g.index, .mig_profile = m.placement.profile, .mig_start = m.placement.start}},
               1,
               0});
          running.push_back(std::move(r));
        }
        continue;
      }
      RunningJob r;
      auto spec = std::make_shared<JobSpec>();
      spec->id = "run-" + std::to_string(id++);
      spec->estimated_duration_ms = (1 + id % 20) * kHourMs;
      r.spec = spec;
      r.placement.nodes.push_back({static_cast<int>(n), {{.gpu = g.index}}, 1, 0});
      running.push_back(std::move(r));
    }
  }
  return running;
}

void BM_FullCycle(benchmark::State& state) {
  std::mt19937 rng(42);
  Snapshot snap;
  snap.now_ms = 100 * kHourMs;
  snap.nodes = MakeNodes(static_cast<int>(state.range(0)));
  snap.running = FillCluster(snap.nodes);
  for (int i = 0; i < state.range(1); ++i) {
    snap.pending.push_back(
        {std::make_shared<const JobSpec>(MixedJob(rng, i)), snap.now_ms - static_cast<TimeMs>(rng() % (50 * kHourMs))});
  }
  SchedulerConfig config = SchedulerConfig::Builtin();
  config.backfill_depth = static_cast<int>(state.range(2));
  config.sharing.time_slice_packing = true;  // the queue's time-sliced halves pack, as when measured
  Engine engine(Cat(), config);
  size_t starts = 0;
  for (auto _ : state) {
    Plan plan = engine.Schedule(snap);
    starts = plan.starts.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["starts"] = static_cast<double>(starts);
  state.counters["running"] = static_cast<double>(snap.running.size());
}
// Third argument: backfill depth (0 examines every pending job, the worst case).
BENCHMARK(BM_FullCycle)
    ->Args({1000, 10000, 0})
    ->Args({10000, 100000, 0})
    ->Args({10000, 100000, 1000})
    ->Unit(benchmark::kMillisecond);

void BM_PlaceOne(benchmark::State& state) {
  std::mt19937 rng(7);
  Snapshot snap;
  snap.nodes = MakeNodes(static_cast<int>(state.range(0)));
  // Half the nodes full, the rest empty: room, but not everywhere.
  std::vector<RunningJob> full = FillCluster(snap.nodes);
  for (RunningJob& r : full) {
    if (r.placement.nodes[0].node % 2 == 0) snap.running.push_back(std::move(r));
  }
  ClusterState cluster(snap, Cat());
  Placer placer(cluster, SchedulerConfig::Builtin());
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 64; ++i) jobs.push_back(MixedJob(rng, i));
  std::vector<Demand> demands;
  for (const JobSpec& j : jobs) demands.push_back(CompileDemand(j, Cat(), cluster.max_gpus_per_type()));
  size_t i = 0;
  int placed = 0;
  for (auto _ : state) {
    auto choice = placer.Find(demands[i++ % demands.size()], 2 * kHourMs);
    placed += choice.has_value();
    benchmark::DoNotOptimize(choice);
  }
  state.counters["placed_share"] = static_cast<double>(placed) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PlaceOne)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_PendingJobMemory(benchmark::State& state) {
  constexpr int kJobs = 100000;
  double per_job = 0;
  for (auto _ : state) {
    std::mt19937 rng(3);
    size_t before = mallinfo2().uordblks;
    std::vector<PendingJob> queue;
    queue.reserve(kJobs);
    for (int i = 0; i < kJobs; ++i) queue.push_back({std::make_shared<const JobSpec>(MixedJob(rng, i)), i});
    per_job = static_cast<double>(mallinfo2().uordblks - before) / kJobs;
    benchmark::DoNotOptimize(queue);
  }
  state.counters["bytes_per_pending_job"] = per_job;
}
BENCHMARK(BM_PendingJobMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gantry

BENCHMARK_MAIN();
