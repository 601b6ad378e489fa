// Quota changes apply without a restart: the file is re-read when it changes; a bad edit
// keeps the last good quotas and says why.
#include "core/reloadable.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/quota_config.h"
#include "sched/engine.h"
#include "test_util.h"

namespace gantry {
namespace {

using namespace testing;

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Reloadable, QuotaChangesApplyWithoutARestart) {
  std::string path = ::testing::TempDir() + "/team_quotas.yaml";
  WriteFile(path, "teams: {ml: {max_gpus: 2}}\n");
  ReloadableFile<QuotaConfig> quotas(path, [](const std::string& p) { return QuotaConfig::LoadFile(p, Catalog()); });
  ASSERT_TRUE(quotas.Refresh().ok());
  Snapshot snap;
  snap.nodes = {MakeNode("n", "A100-80GB", 8)};
  snap.pending = {Pending(MakeJob("j").Team("ml").Gpus(4))};
  EXPECT_EQ(Schedule(snap, MechanismConfig(), quotas.current().get()).waiting[0].code, WaitCode::kQuota);

  // The admin raises the limit; the next cycle sees it.
  WriteFile(path, "teams: {ml: {max_gpus: 8}}   # raised\n");
  ASSERT_TRUE(quotas.Refresh().ok());
  EXPECT_EQ(quotas.version(), 2);
  EXPECT_EQ(Schedule(snap, MechanismConfig(), quotas.current().get()).starts.size(), 1u);

  // A typo is refused by name and the last good quotas stay in force.
  WriteFile(path, "teams: {ml: {max_gpu: 1}}\n");
  Status bad = quotas.Refresh();
  EXPECT_EQ(bad.field(), "teams.ml.max_gpu");
  EXPECT_EQ(quotas.version(), 2);
  EXPECT_DOUBLE_EQ(quotas.current()->Team("ml").max_gpus, 8);
  // Unchanged since the failed look: nothing to do, and no error repeated.
  EXPECT_TRUE(quotas.Refresh().ok());
  EXPECT_EQ(quotas.version(), 2);
}

}  // namespace
}  // namespace gantry
