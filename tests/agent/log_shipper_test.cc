// Log shipping from remote agents: base64 round trips, offsets that advance only when the
// server took a report, a budget per report, and ended jobs forgotten once shipped.
#include "agent/log_shipper.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST(LogShipper, ShipsNewBytesUntilTakenThenForgetsAnEndedJob) {
  std::string dir = ::testing::TempDir() + "ship-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/7");
  std::ofstream(dir + "/7/stdout.log") << "0123456789";
  LogShipper shipper([&](const std::string& id) { return dir + "/" + id; });
  shipper.Track("7");
  nlohmann::json first = shipper.Collect(4);  // a budget of 4 bytes
  ASSERT_EQ(first.size(), 1u);
  std::string bytes;
  ASSERT_TRUE(Base64Decode(first[0]["data"], &bytes));
  EXPECT_EQ(bytes, "0123");
  EXPECT_EQ(shipper.Collect(4)[0]["offset"], 0);  // not taken: the same bytes again
  shipper.Acknowledge(first);
  nlohmann::json rest = shipper.Collect(100);
  ASSERT_TRUE(Base64Decode(rest[0]["data"], &bytes));
  EXPECT_EQ(rest[0]["offset"], 4);
  EXPECT_EQ(bytes, "456789");
  shipper.Ended("7");
  shipper.Acknowledge(rest);
  EXPECT_TRUE(shipper.Collect(100).empty());
  std::ofstream(dir + "/7/stdout.log", std::ios::app) << "late";
  EXPECT_TRUE(shipper.Collect(100).empty());  // forgotten
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry
