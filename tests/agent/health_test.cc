// Health rules, nvidia-smi parsing, and the GPU monitor over fake GPUs.
#include "agent/health.h"

#include <gtest/gtest.h>

#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/report_sink.h"

namespace gantry::testing {
namespace {

TEST(Health, XidsFollowNvidiasCatalog) {
  const HealthRules& rules = HealthRules::Builtin();
  EXPECT_NE(XidReason(79, rules).find("fell off the bus"), std::string::npos);
  EXPECT_FALSE(XidReason(48, rules).empty());  // double-bit ECC: drain
  EXPECT_FALSE(XidReason(95, rules).empty());
  EXPECT_TRUE(XidReason(13, rules).empty());  // the application's fault
  EXPECT_TRUE(XidReason(31, rules).empty());
  EXPECT_TRUE(XidReason(63, rules).empty());    // a remap event: counted
  EXPECT_FALSE(XidReason(999, rules).empty());  // unknown: drain, as the device plugin does
}

TEST(Health, ReadingsThatFenceAGpu) {
  const HealthRules& rules = HealthRules::Builtin();
  GpuSample s;
  EXPECT_EQ(UnhealthyReason(s, rules), "");
  s.temperature_c = 95;
  EXPECT_NE(UnhealthyReason(s, rules).find("temperature 95"), std::string::npos);
  s.temperature_c = 60;
  s.ecc_uncorrected = 2;
  EXPECT_NE(UnhealthyReason(s, rules).find("uncorrectable ECC"), std::string::npos);
  s.ecc_uncorrected = 0;
  s.lost = true;
  EXPECT_NE(UnhealthyReason(s, rules).find("lost"), std::string::npos);
}

TEST(Health, RulesFileErrorsNameTheField) {
  EXPECT_EQ(HealthRules::FromYaml("unknown_xid: panic").status().field(), "health.unknown_xid");
  EXPECT_EQ(HealthRules::FromYaml("colour: red").status().field(), "health.colour");
  EXPECT_EQ(HealthRules::FromYaml("check_interval: 10ms").status().field(), "health.check_interval");
}

TEST(NvidiaSmi, ParsesInventoryAndReadings) {
  auto inv = ParseNvidiaSmiInventory(
      "0, GPU-1111, NVIDIA H100 80GB HBM3, 00000000:19:00.0, 81559, Disabled, 550.54.15\n"
      "1, GPU-2222, NVIDIA H100 80GB HBM3, 00000000:3B:00.0, 81559, Enabled, 550.54.15\n");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[1].uuid, "GPU-2222");
  EXPECT_TRUE(inv->gpus[1].mig_enabled);
  EXPECT_EQ(inv->gpus[0].memory_total_mib, 81559);
  EXPECT_EQ(inv->driver_version, "550.54.15");
  auto samples = ParseNvidiaSmiSamples("GPU-1111, 87, 30, 40000, 81559, 61, 512.30, 700.00, 1980, 0, [N/A]\n");
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ((*samples)[0].util_pct, 87);
  EXPECT_EQ((*samples)[0].mem_used_mib, 40000);
  EXPECT_DOUBLE_EQ((*samples)[0].power_w, 512.30);
  EXPECT_EQ((*samples)[0].ecc_uncorrected, -1);  // [N/A]
  EXPECT_FALSE(ParseNvidiaSmiSamples("GPU-1, 3\n").ok());
}

TEST(GpuMonitor, AnXidFencesTheGpuAndAPassingCheckReturnsIt) {
  GpuInventory inv;
  inv.gpus.push_back({0, "GPU-a", "A100-80GB", "", 81920, false, {}, {}});
  inv.gpus.push_back({1, "GPU-b", "A100-80GB", "", 81920, false, {}, {}});
  FakeGpuProvider fake(inv);
  fake.SetLoad("GPU-a", 1.0, 30000, {{4242, 30000}});
  HealthRules rules = HealthRules::Builtin();
  rules.check_command = "test \"$GANTRY_GPU_UUID\" = GPU-b";  // passes for GPU-b only
  rules.check_interval_ms = 1000;
  ReportSink sink;
  std::vector<GpuHealthChange>& health = sink.health;
  std::map<int, GpuSample>& last = sink.last;
  GpuMonitor monitor(fake, rules, {{"GPU-a", {"n1", 0}}, {"GPU-b", {"n1", 1}}}, sink,
                     [](int pid) { return pid == 4242 ? std::string("job-7") : std::string(); });
  monitor.PollOnce();
  EXPECT_TRUE(health.empty());
  EXPECT_GT(last[0].util_pct, 60);  // a busy GPU
  EXPECT_EQ(last[1].util_pct, 0);
  ASSERT_EQ(last[0].processes.size(), 1u);
  EXPECT_EQ(last[0].processes[0].job_id, "job-7");
  fake.InjectXid("GPU-a", 13);  // the application's fault: nothing happens
  fake.InjectXid("GPU-b", 79);
  monitor.PollOnce();
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0].gpu, 1);
  EXPECT_FALSE(health[0].healthy);
  EXPECT_TRUE(last[1].lost);
  fake.Heal("GPU-b");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  monitor.PollOnce();
  ASSERT_EQ(health.size(), 2u);
  EXPECT_EQ(health[1].gpu, 1);
  EXPECT_TRUE(health[1].healthy);
}

}  // namespace
}  // namespace gantry::testing
