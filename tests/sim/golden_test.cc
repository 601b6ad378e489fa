// Golden run: the first 3,000 jobs of the Philly trace (traces/philly) on a 64-GPU cluster, for
// each policy, must give byte-identical JSON (sim_wall_s aside) to the checked-in files.
// After an intended change: GANTRY_UPDATE_GOLDEN=1 ./build/gantry_unit_tests --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/spec_yaml.h"
#include "sim/policy.h"
#include "sim/report.h"

namespace gantry {
namespace {

const char* kTrace = GANTRY_SOURCE_DIR "/traces/philly/philly-2017-09-04_2017-11-14.csv";

std::string FirstLines(const std::string& path, int lines) {
  std::ifstream in(path);
  std::string out, line;
  for (int i = 0; i <= lines && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GoldenPhilly, First3000JobsOn64Gpus) {
  ASSERT_TRUE(std::filesystem::exists(kTrace)) << "the trace ships in the repository: " << kTrace;
  ConfigSet config{GpuCatalog::Builtin(), SchedulerConfig::Builtin(), QuotaConfig{}, ""};
  auto nodes = LoadClusterFile(GANTRY_SOURCE_DIR "/tests/golden/cluster-64.yaml", config.catalog);
  ASSERT_TRUE(nodes.ok());
  auto trace = ParseTrace(FirstLines(kTrace, 3000), TraceFormat::kPhilly, true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3000u);
  for (const std::string& policy : PolicyNames()) {
    SimOptions options;
    options.policy = policy;
    auto result = Simulate(*nodes, *trace, config, options);
    ASSERT_TRUE(result.ok());
    nlohmann::json j = SimResultToJson({*result, 0});
    j.erase("sim_wall_s");
    std::string got = j.dump(2) + "\n";
    std::string path = std::string(GANTRY_SOURCE_DIR "/tests/golden/philly_3000_") + policy + ".json";
    if (std::getenv("GANTRY_UPDATE_GOLDEN")) {
      std::ofstream(path) << got;
      continue;
    }
    EXPECT_EQ(got, ReadFile(path)) << "golden mismatch for " << policy << " (" << path << ")";
    EXPECT_EQ(result->jobs_completed, 3000) << policy;
    // Whole GPUs only: every job holds what it asked for, so useful work equals allocation
    // (a start applied to the wrong queued job once broke this under preemption).
    EXPECT_NEAR(result->useful_gpu_utilization, result->gpu_utilization, 1e-12) << policy;
  }
}

}  // namespace
}  // namespace gantry
