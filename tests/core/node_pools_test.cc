// pools.yaml: a full file reads back as written (with the defaults for what it leaves
// out), and every kind of mistake is refused naming its field.
#include "core/node_pools.h"

#include <gtest/gtest.h>

#include "core/read_file.h"
#include "test_util.h"

namespace gantry::testing {
namespace {

const char* kPools = R"(
autoscaler: {scale_down_after: 15m, spot_fallback_after: 2m}
pools:
  - name: a100-spot
    gpu_type: A100-80GB
    gpus_per_node: 8
    capacity: spot
    max_nodes: 16
    labels: {zone: b}
    taints: [spot=true]
    scale_up_command: /etc/gantry/cloud-up
    scale_down_command: /etc/gantry/cloud-down
    startup: 4m
    spot_reclaims_per_node_hour: 0.05
  - {name: t4, gpu_type: T4, gpus_per_node: 4, min_nodes: 1, max_nodes: 4, price: 0.40}
)";

TEST(NodePools, AFullFileReadsBackWithDefaultsForTheRest) {
  auto c = ParseAutoscalerYaml(kPools, Catalog());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scale_down_after, 15 * kMinuteMs);
  EXPECT_EQ(c->spot_fallback_after, 2 * kMinuteMs);
  EXPECT_EQ(c->scale_up_after, 30 * kSecondMs);
  EXPECT_EQ(c->register_timeout, 10 * kMinuteMs);
  ASSERT_EQ(c->pools.size(), 2u);
  const NodePool& spot = c->pools[0];
  EXPECT_EQ(spot.capacity, Capacity::kSpot);
  EXPECT_EQ(spot.labels,
            (std::map<std::string, std::string>{{"gantry.io/capacity", "spot"}, {"pool", "a100-spot"}, {"zone", "b"}}));
  EXPECT_EQ(spot.taints, (std::vector<Taint>{{"spot", "true"}}));
  EXPECT_EQ(spot.startup_ms, 4 * kMinuteMs);
  EXPECT_DOUBLE_EQ(spot.PricePerGpuHour(Catalog()), Catalog().Get(spot.type).price_spot);
  const NodePool& t4 = c->pools[1];
  EXPECT_EQ(t4.capacity, Capacity::kOnDemand);
  EXPECT_EQ(t4.min_nodes, 1);
  EXPECT_DOUBLE_EQ(t4.PricePerGpuHour(Catalog()), 0.40);
  EXPECT_TRUE(t4.scale_up_command.empty());
  EXPECT_EQ(c->Find("t4"), &c->pools[1]);
  EXPECT_TRUE(ParseAutoscalerYaml("", Catalog())->pools.empty()) << "an empty file: no pools, no autoscaling";
}

TEST(NodePools, MistakesAreRefusedNamingTheField) {
  const std::string base = "pools:\n  - {name: p, gpu_type: T4, gpus_per_node: 4, max_nodes: 2";
  const std::pair<std::string, std::string> cases[] = {
      {base + ", colour: red}", "pools[0].colour"},
      {base + ", capacity: cheap}", "pools[0].capacity"},
      {base + ", min_nodes: 3}", "pools[0].min_nodes"},
      {base + ", max_nodes: 0}", "pools[0].max_nodes"},
      {"pools:\n  - {name: p, gpu_type: Z80, gpus_per_node: 4, max_nodes: 2}", "pools[0].gpu_type"},
      {"pools:\n  - {name: 'p; rm -rf /', gpu_type: T4, gpus_per_node: 4, max_nodes: 2}", "pools[0].name"},
      {"pools:\n  - {name: p, gpu_type: T4, gpus_per_node: 65, max_nodes: 2}", "pools[0].gpus_per_node"},
      {"pools:\n  - {name: p, gpu_type: T4, gpus_per_node: 4}", "pools[0].max_nodes"},
      {base + ", scale_up_command: up}", "pools[0].scale_down_command"},
      {base + ", spot_reclaims_per_node_hour: 1}", "pools[0].spot_reclaims_per_node_hour"},
      {base + ", price: -3}", "pools[0].price"},
      {base + ", startup: soon}", "pools[0].startup"},
      {base + ", labels: {pool: other}}", "pools[0].labels.pool"},
      {base + "}\n  - {name: p, gpu_type: T4, gpus_per_node: 4, max_nodes: 2}", "pools[1].name"},
      {"autoscaler: {scale_down_after: 0s}", "autoscaler.scale_down_after"},
      {"autoscaler: {hook_timout: 1m}", "autoscaler.hook_timout"},
      {"pools: {name: p}", "pools"},
      {"pool: []", "pool"},
  };
  for (const auto& [text, field] : cases) {
    auto c = ParseAutoscalerYaml(text, Catalog());
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().field(), field) << text << "\n" << c.status().ToString();
  }
}

}  // namespace
}  // namespace gantry::testing

namespace gantry {
namespace {

TEST(NodePools, TheShippedExamplePoolsFileIsValid) {
  auto text = ReadFileNoThrow(std::string(GANTRY_SOURCE_DIR "/examples/autoscaler/pools.yaml"));
  ASSERT_TRUE(text);
  auto config = ParseAutoscalerYaml(*text, GpuCatalog::Builtin());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->pools.size(), 2u);
  EXPECT_EQ(config->pools[0].capacity, Capacity::kSpot);
  EXPECT_EQ(config->hook_timeout, 2 * kMinuteMs);
}

}  // namespace
}  // namespace gantry
