// Log shipping from remote agents: base64 round trips, offsets that advance only when the
// server took a report, a budget per report, and ended jobs forgotten once shipped.
#include "agent/log_shipper.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/encoding.h"

namespace gantry {
namespace {

TEST(Base64, RoundTripsAnyBytes) {
  for (std::string bytes : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                            std::string("\0\xff\n\x80 binary", 11)}) {
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(bytes), &back));
    EXPECT_EQ(back, bytes);
  }
  std::string ignored;
  EXPECT_FALSE(Base64Decode("abc", &ignored));
}

TEST(LogShipper, ShipsNewBytesUntilTakenThenForgetsAnEndedRun) {
  std::string dir = ::testing::TempDir() + "ship-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/7/run-1");
  std::ofstream(dir + "/7/run-1/rank-0.stdout.log") << "0123456789";
  LogShipper shipper([&](const std::string& id) { return dir + "/" + id; });
  shipper.Track("7", 1);
  nlohmann::json first = shipper.Collect(4);  // a budget of 4 bytes
  ASSERT_EQ(first.size(), 1u);
  std::string bytes;
  ASSERT_TRUE(Base64Decode(first[0]["data"], &bytes));
  EXPECT_EQ(bytes, "0123");
  EXPECT_EQ(first[0]["run"], 1);
  EXPECT_EQ(first[0]["rank"], 0);
  EXPECT_EQ(shipper.Collect(4)[0]["offset"], 0);  // not taken: the same bytes again
  shipper.Acknowledge(first);
  nlohmann::json rest = shipper.Collect(100);
  ASSERT_TRUE(Base64Decode(rest[0]["data"], &bytes));
  EXPECT_EQ(rest[0]["offset"], 4);
  EXPECT_EQ(bytes, "456789");
  shipper.Ended("7", 1);
  shipper.Acknowledge(rest);
  EXPECT_TRUE(shipper.Collect(100).empty());
  std::ofstream(dir + "/7/run-1/rank-0.stdout.log", std::ios::app) << "late";
  EXPECT_TRUE(shipper.Collect(100).empty());  // forgotten
  std::filesystem::remove_all(dir);
}

// Before: a job's exit went out with the first 256 KiB of its output; `gantry run` saw the
// job end and stopped reading before the rest came.
TEST(LogShipper, AnEndedRunIsBehindUntilACollectTakesTheRestOfItsOutput) {
  std::string dir = ::testing::TempDir() + "ship-behind-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/8/run-1");
  std::ofstream(dir + "/8/run-1/rank-0.stdout.log") << "0123456789";
  std::ofstream(dir + "/8/run-1/rank-0.stderr.log") << "err";
  LogShipper shipper([&](const std::string& id) { return dir + "/" + id; });
  shipper.Track("8", 1);
  shipper.Collect(4);
  EXPECT_TRUE(shipper.Behind().empty());  // still running: its exit is not held
  shipper.Ended("8", 1);
  nlohmann::json part = shipper.Collect(8);  // 8 of 13 bytes
  EXPECT_EQ(shipper.Behind(), (std::set<std::pair<std::string, int>>{{"8", 1}}));
  shipper.Acknowledge(part);
  nlohmann::json rest = shipper.Collect(100);
  EXPECT_TRUE(shipper.Behind().empty()) << rest.dump();
  std::filesystem::remove_all(dir);
}

// Before: one stdout.log per job on each side, written by offset by every rank and run (a
// second run's bytes landed in the middle of the first's).
TEST(LogShipper, EachRunAndRankShipsFromItsOwnFileAndOffset) {
  std::string dir = ::testing::TempDir() + "ship-ranks-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/9/run-1");
  std::filesystem::create_directories(dir + "/9/run-2");
  std::ofstream(dir + "/9/run-1/rank-1.stdout.log") << "first run\n";
  std::ofstream(dir + "/9/run-2/rank-1.stdout.log") << "second\n";
  std::ofstream(dir + "/9/run-2/rank-1.stderr.log") << "oops\n";
  LogShipper shipper([&](const std::string& id) { return dir + "/" + id; });
  shipper.Track("9", 1);
  shipper.Ended("9", 1);
  shipper.Track("9", 2);
  nlohmann::json chunks = shipper.Collect(1000);
  ASSERT_EQ(chunks.size(), 3u) << chunks.dump();
  std::map<std::string, std::string> got;
  for (const auto& c : chunks) {
    std::string bytes;
    ASSERT_TRUE(Base64Decode(c["data"], &bytes));
    EXPECT_EQ(c["offset"], 0);
    EXPECT_EQ(c["rank"], 1);
    got[fmt::format("{}/{}", c["run"].get<int>(), c["stream"].get<std::string>())] = bytes;
  }
  EXPECT_EQ(got["1/stdout"], "first run\n");
  EXPECT_EQ(got["2/stdout"], "second\n");
  EXPECT_EQ(got["2/stderr"], "oops\n");
  shipper.Acknowledge(chunks);
  std::ofstream(dir + "/9/run-2/rank-1.stdout.log", std::ios::app) << "more\n";
  nlohmann::json next = shipper.Collect(1000);
  ASSERT_EQ(next.size(), 1u);  // run 1 ended and was shipped whole: forgotten
  EXPECT_EQ(next[0]["run"], 2);
  EXPECT_EQ(next[0]["offset"], 7);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry
