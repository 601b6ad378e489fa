// GPU catalog: the shipped types, MIG placement rules, and YAML errors.
#include "core/gpu_catalog.h"

#include <gtest/gtest.h>

#include "core/config_dir.h"

namespace gantry {
namespace {

const GpuType& Type(const char* name) { return *GpuCatalog::Builtin().Find(name); }

std::vector<MigPlacement> Layout(const GpuType& t, std::vector<std::pair<std::string, int>> items) {
  std::vector<MigPlacement> out;
  for (auto& [name, start] : items) out.push_back({t.FindMigProfile(name), start});
  return out;
}

TEST(GpuCatalog, ShipsTheRequiredTypes) {
  for (const char* name :
       {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "L40S", "A10G", "T4"}) {
    EXPECT_NE(GpuCatalog::Builtin().Find(name), nullptr) << name;
  }
  EXPECT_EQ(Type("A100-80GB").memory_mib, 80 * 1024);
  EXPECT_DOUBLE_EQ(Type("H100-80GB").price_on_demand, 6.88);
  EXPECT_FALSE(Type("T4").supports_mig());
  EXPECT_EQ(Type("A100-40GB").mig_compute_slices, 7);
}

TEST(GpuCatalog, FindsByNvmlNameIgnoringCase) {
  const GpuType* t = GpuCatalog::Builtin().Find("nvidia a100-sxm4-80gb");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "A100-80GB");
  EXPECT_EQ(GpuCatalog::Builtin().Find("H300"), nullptr);
}

TEST(GpuCatalog, ShippedFileMatchesBuiltin) {
  auto set = LoadConfigDir(GANTRY_SOURCE_DIR "/config");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->catalog.size(), GpuCatalog::Builtin().size());
}

TEST(MigLayout, AcceptsTheRealA100Layouts) {
  const GpuType& t = Type("A100-80GB");
  std::vector<std::pair<std::string, int>> seven;
  for (int i = 0; i < 7; ++i) seven.push_back({"1g.10gb", i});
  EXPECT_TRUE(MigLayoutValid(t, Layout(t, seven)));
  EXPECT_TRUE(MigLayoutValid(t, Layout(t, {{"3g.40gb", 0}, {"3g.40gb", 4}})));
  EXPECT_TRUE(MigLayoutValid(t, Layout(t, {{"4g.40gb", 0}, {"3g.40gb", 4}})));  // 4 + 3 = 7 compute slices
  EXPECT_TRUE(MigLayoutValid(t, Layout(t, {{"4g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}})));
  EXPECT_TRUE(MigLayoutValid(t, Layout(t, {{"7g.80gb", 0}})));
}

TEST(MigLayout, RefusesWhatTheHardwareRefuses) {
  const GpuType& t = Type("A100-80GB");
  std::string why;
  EXPECT_FALSE(MigLayoutValid(t, Layout(t, {{"1g.10gb", 7}}), &why));  // 1g may start at 0..6 only
  EXPECT_NE(why.find("may not start"), std::string::npos);
  EXPECT_FALSE(MigLayoutValid(t, Layout(t, {{"3g.40gb", 0}, {"2g.20gb", 2}}), &why));  // slots 0-3 and 2-3
  EXPECT_NE(why.find("overlaps"), std::string::npos);
  EXPECT_FALSE(MigLayoutValid(t, Layout(t, {{"3g.40gb", 2}})));                        // starts 0 or 4
  EXPECT_FALSE(MigLayoutValid(t, Layout(t, {{"1g.10gb+me", 0}, {"1g.10gb+me", 1}})));  // one media engine
  EXPECT_FALSE(MigLayoutValid(Type("T4"), {}));
}

TEST(MigLayout, FindsTheFirstFreeStart) {
  const GpuType& t = Type("A100-80GB");
  int p3 = t.FindMigProfile("3g.40gb");
  EXPECT_EQ(FindMigStart(t, Layout(t, {{"3g.40gb", 0}}), p3), 4);
  EXPECT_FALSE(FindMigStart(t, Layout(t, {{"3g.40gb", 0}, {"3g.40gb", 4}}), p3).has_value());
  // 3g + 2g + 1g leave slot 7 and one compute slice: a 1g cannot start at 7.
  EXPECT_FALSE(FindMigStart(t, Layout(t, {{"3g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}}), t.FindMigProfile("1g.10gb"))
                   .has_value());
  const GpuType& a30 = Type("A30-24GB");
  EXPECT_EQ(FindMigStart(a30, Layout(a30, {{"2g.12gb", 0}}), a30.FindMigProfile("2g.12gb")), 2);
}

TEST(GpuCatalogYaml, AddsATypeWithoutARebuild) {
  auto c = GpuCatalog::FromYaml(R"(
gpu_types:
  B200:
    memory_gb: 180
    relative_speed: 9
    price_on_demand: 11.5
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_NE(c->Find("B200"), nullptr);
  EXPECT_DOUBLE_EQ(c->Find("B200")->price_spot, 11.5);  // spot defaults to on-demand
}

TEST(GpuCatalogYaml, NamesTheBadField) {
  auto unknown = GpuCatalog::FromYaml(
      "gpu_types:\n  X:\n    memory_gb: 1\n    relative_speed: 1\n    price_on_demand: 1\n    colour: red\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "gpu_types.X.colour");
  EXPECT_EQ(unknown.status().message(), "unknown field");
  auto missing = GpuCatalog::FromYaml("gpu_types:\n  X:\n    memory_gb: 1\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "gpu_types.X.relative_speed");
  auto malformed = GpuCatalog::FromYaml("gpu_types: [\n");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("malformed YAML at line"), std::string::npos);
  auto bad_start = GpuCatalog::FromYaml(R"(
gpu_types:
  X:
    memory_gb: 8
    relative_speed: 1
    price_on_demand: 1
    mig: {compute_slices: 2, memory_slots: 2, profiles: [{name: a, compute: 1, slots: 2, memory_gb: 4, max: 1, starts: [1]}]}
)");
  ASSERT_FALSE(bad_start.ok());
  EXPECT_EQ(bad_start.status().field(), "gpu_types.X.mig.profiles[0].starts");
}

}  // namespace
}  // namespace gantry
