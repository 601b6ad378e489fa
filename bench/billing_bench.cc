// Accounting benchmarks (Google Benchmark). Figures and the machine they ran on are in
// docs/BENCHMARKS.md.
//   BM_MonthlyReport/<rows>: the monthly report (teams, projects, types, jobs, daily cuts)
//     over <rows> ledger intervals spread over a month, 20 teams, 4 GPU types, one price
//     change mid-month.
//   BM_UsageByJob/<rows>: GET /v1/usage?by=job's arithmetic over the same rows.
//   BM_StoreAllocations/<rows>: reading the month's rows back from SQLite (the store's query).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "billing/report.h"
#include "server/store.h"

namespace gantry {
namespace {

constexpr TimeMs kNov1 = 1793491200000;  // 2026-11-01T00:00:00Z
const char* kTypes[] = {"A100-80GB", "H100-80GB", "T4", "L40S"};

std::vector<Allocation> MakeLedger(int rows) {
  std::mt19937 rng(7);
  std::vector<Allocation> out;
  out.reserve(rows);
  for (int i = 0; i < rows; ++i) {
    Allocation a;
    a.job_id = std::to_string(i / 2);
    a.run = 1;
    a.slot = i % 2;
    a.team = "team-" + std::to_string(rng() % 20);
    a.project = "p" + std::to_string(rng() % 5);
    a.user = "u" + std::to_string(rng() % 200);
    a.node = "n" + std::to_string(rng() % 100);
    a.gpu_index = static_cast<int>(rng() % 8);
    a.gpu_type = kTypes[rng() % 4];
    a.share = rng() % 4 == 0 ? 0.25 : 1.0;
    a.start_ms = kNov1 - kHourMs + static_cast<TimeMs>(rng() % (30 * 24)) * kHourMs;
    a.end_ms = a.start_ms + static_cast<TimeMs>(1 + rng() % 48) * kHourMs;
    a.samples = 60;
    a.util_sum = 60.0 * static_cast<double>(rng() % 100);
    out.push_back(std::move(a));
  }
  return out;
}

PriceBook Prices() {
  PriceBook book = *PriceBook::Build(GpuCatalog::Builtin(), PricingConfig{}, Calendar());
  book.Set("A100-80GB", "", {{kBeginningOfTime, 3.43}, {kNov1 + 15 * 24 * kHourMs, 3.00}});
  return book;
}

void BM_MonthlyReport(benchmark::State& state) {
  std::vector<Allocation> ledger = MakeLedger(static_cast<int>(state.range(0)));
  PriceBook prices = Prices();
  for (auto _ : state) {
    auto r = MonthlyReport(ledger, Calendar(), prices, kNov1 + 40 * 24 * kHourMs, {"2026-11", "USD", 10});
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MonthlyReport)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_UsageByJob(benchmark::State& state) {
  std::vector<Allocation> ledger = MakeLedger(static_cast<int>(state.range(0)));
  PriceBook prices = Prices();
  for (auto _ : state) {
    auto lines = AggregateUsage(ledger, kNov1, kNov1 + 30 * 24 * kHourMs, kNov1 + 40 * 24 * kHourMs, prices,
                                UsageGrouping::kJob);
    benchmark::DoNotOptimize(lines);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_UsageByJob)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_StoreAllocations(benchmark::State& state) {
  std::string path = std::filesystem::temp_directory_path() / ("gantry-bench-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    auto store = OpenSqliteStore(path, {.synchronous_full = false});
    StoreBatch batch;
    batch.allocations = MakeLedger(static_cast<int>(state.range(0)));
    if (!(*store)->Commit(batch).ok()) state.SkipWithError("commit failed");
  }
  auto store = OpenSqliteStore(path, {.synchronous_full = false});
  for (auto _ : state) {
    auto rows = (*store)->Allocations(kNov1, kNov1 + 30 * 24 * kHourMs);
    benchmark::DoNotOptimize(rows);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}
BENCHMARK(BM_StoreAllocations)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gantry

BENCHMARK_MAIN();
