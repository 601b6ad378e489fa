// `gantry gpus`.
#include "cli/gpus_command.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "agent/fake_gpus.h"
#include "agent/fake_provider.h"
#include "agent/gpu_provider.h"
#include "protocol/inventory.h"
#include "protocol/order_wire.h"
#include "protocol/spec_json.h"

namespace gantry {

namespace {

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int RunGpusCommand(const GpusCommandOptions& o, std::ostream& out, std::ostream& err) {
  std::string why;
  std::unique_ptr<GpuProvider> provider;
  if (o.provider == "fake") {
    // Eight fake A100s: the agent's own polling cost, without a driver's.
    auto nodes = ParseFakeGpus("1x8xA100-80GB", GpuCatalog::Builtin());
    provider = std::make_unique<FakeGpuProvider>(FakeInventory(*nodes, GpuCatalog::Builtin()));
  } else {
    provider = DetectGpuProvider(o.provider, &why);
  }
  if (!provider) {
    err << "gantry gpus: no GPU provider: " << why << "\n";
    return 1;
  }
  auto inv = provider->Inventory();
  auto samples = provider->Sample();
  if (!inv || !samples) {
    err << "gantry gpus: " << (!inv ? inv.status() : samples.status()).ToString() << "\n";
    return 1;
  }
  nlohmann::json result = {{"provider", provider->name()}, {"inventory", InventoryToJson(*inv)}};
  nlohmann::json readings = nlohmann::json::array();
  for (const GpuSample& s : *samples) readings.push_back(SampleToWire(s));
  result["samples"] = readings;
  if (o.measure_s > 0) {
    // Polls as the agent does (a reading, then events until the next one), for measure_s.
    auto t0 = std::chrono::steady_clock::now();
    double cpu0 = CpuSeconds();
    int polls = 0;
    auto interval = std::chrono::duration<double>(o.interval_s);
    while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(o.measure_s)) {
      auto next = std::chrono::steady_clock::now() + interval;
      if (provider->Sample()) ++polls;
      while (std::chrono::steady_clock::now() < next) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
        provider->Events(static_cast<int>(std::max<int64_t>(1, left.count())));
      }
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = CpuSeconds() - cpu0;
    result["polling"] = {
        {"seconds", wall},          {"polls", polls},     {"interval_s", o.interval_s},
        {"gpus", inv->gpus.size()}, {"cpu_seconds", cpu}, {"cpu_share_of_one_core_pct", 100 * cpu / wall}};
  }
  out << result.dump(2, ' ', false, kReplaceBadUtf8) << "\n";
  return 0;
}

}  // namespace gantry
