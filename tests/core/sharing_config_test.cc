// The site's sharing settings: the slow-down model's arithmetic and the config's errors.
#include "core/sharing_config.h"

#include <gtest/gtest.h>

#include "core/scheduler_config.h"

namespace gantry {
namespace {

TEST(SharedSpeed, FollowsTheMeasuredPointsAndKeepsTheGpusTotalPastThem) {
  SharingConfig c;  // time-slice {2: 0.12}; mps {2: 0.725, 4: 0.578}
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kMps, 1), 1.0);
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kMps, 2), 0.725);
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kMps, 3), (0.725 + 0.578) / 2);  // linear between 2 and 4
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kMps, 4), 0.578);
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kMps, 8), 0.578 * 4 / 8);  // the 4-job total, split 8 ways
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kTimeSlice, 2), 0.12);
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kTimeSlice, 4), 0.06);
  EXPECT_DOUBLE_EQ(SharedSpeed(c, SharingMode::kExclusive, 4), 1.0);
}

TEST(SharingConfig, ShippedFileGivesTheDefaults) {
  const SharingConfig& c = SchedulerConfig::Builtin().sharing;
  EXPECT_EQ(c.fraction_default, SharingMode::kAuto);
  EXPECT_FALSE(c.time_slice_packing);
  EXPECT_EQ(c.mps_speed.at(4), 0.578);
  EXPECT_EQ(c.pool_label, "pool");
}

std::string ErrorOf(const std::string& sharing_yaml) {
  auto c = SchedulerConfig::FromYaml("priority_classes: [{name: medium, rank: 1}]\nsharing: " + sharing_yaml);
  return c.ok() ? "" : c.status().ToString();
}

TEST(SharingConfig, BadSettingsNameTheirField) {
  EXPECT_EQ(ErrorOf("{default: auto, by_gpu_type: {T4: time-slice}, by_pool: {a: mps}}"), "");
  EXPECT_NE(ErrorOf("{default: exclusive}").find("sharing.default"), std::string::npos);
  EXPECT_NE(ErrorOf("{by_pool: {render: mig}}").find("sharing.by_pool.render"), std::string::npos);
  EXPECT_NE(ErrorOf("{speed: {mps: {2: 7}}}").find("sharing.speed.mps.2"), std::string::npos);
  EXPECT_NE(ErrorOf("{speed: {mps: {1: 0.5}}}").find("sharing.speed.mps"), std::string::npos);
  EXPECT_NE(ErrorOf("{time_slice_packing: maybe}").find("sharing.time_slice_packing"), std::string::npos);
  EXPECT_NE(ErrorOf("{packing: true}").find("sharing.packing"), std::string::npos);
}

}  // namespace
}  // namespace gantry
