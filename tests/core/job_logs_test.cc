// The per-job log cap: older runs go first, the newest run keeps its newest bytes, and what
// was cut is counted so readers by offset keep their place and can say so.
#include "core/job_logs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/log_window.h"

namespace gantry {
namespace {

class JobLogs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "job-logs-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(int run, int rank, const std::string& stream, size_t bytes) {
    std::filesystem::create_directories(RunLogDir(dir_, run));
    std::ofstream(RunLogPath(dir_, run, rank, stream)) << std::string(bytes, 'x');
  }
  std::string dir_;
};

TEST_F(JobLogs, ListsEachRunRankAndStreamAndCountsRanks) {
  Write(1, 0, "stdout", 1);
  Write(2, 1, "stderr", 1);
  Write(2, 0, "stdout", 1);
  std::ofstream(RunLogDir(dir_, 2) + "/notes.txt") << "not a log";
  std::vector<RunLogFile> all = ListRunLogs(dir_);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].run, 1);
  EXPECT_EQ(all[1].run, 2);
  EXPECT_EQ(all[1].rank, 0);
  EXPECT_EQ(all[2].stream, "stderr");
  EXPECT_EQ(ListRunLogs(dir_, 2).size(), 2u);
  EXPECT_EQ(RunLogRanks(dir_, 2), 2);
  EXPECT_EQ(RunLogRanks(dir_, 1), 1);
  EXPECT_EQ(RunLogRanks(dir_, 3), 0);
}

TEST_F(JobLogs, TheCapDropsOlderRunsBeforeCuttingTheNewest) {
  Write(1, 0, "stdout", 600 << 10);
  Write(2, 0, "stdout", 300 << 10);
  CapJobLogs(dir_, 512 << 10);
  std::string old_run = RunLogPath(dir_, 1, 0, "stdout");
  std::string new_run = RunLogPath(dir_, 2, 0, "stdout");
  EXPECT_EQ(std::filesystem::file_size(old_run), 0u);
  EXPECT_EQ(LogCutBytes(old_run), 600 << 10);  // a reader is told it is gone
  EXPECT_EQ(LogLogicalSize(old_run), 600 << 10);
  EXPECT_EQ(std::filesystem::file_size(new_run), 300u << 10);  // within the cap: kept whole

  Write(3, 0, "stdout", 2 << 20);
  Write(3, 1, "stdout", 2 << 20);
  CapJobLogs(dir_, 1 << 20);
  EXPECT_EQ(std::filesystem::file_size(new_run), 0u);
  for (int rank : {0, 1}) {
    std::string path = RunLogPath(dir_, 3, rank, "stdout");
    EXPECT_LE(std::filesystem::file_size(path), 512u << 10) << rank;
    EXPECT_EQ(LogLogicalSize(path), 2 << 20) << rank;
  }
}

}  // namespace
}  // namespace gantry
