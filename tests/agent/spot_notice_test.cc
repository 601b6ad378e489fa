// Spot notices on the agent: what a notice's text means, a notice file and a notice
// command each reported once, and the notice in the agent's report on the wire.
#include "agent/spot_notice.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "protocol/report_wire.h"
#include "report_sink.h"
#include "server/controller_harness.h"

namespace gantry {
namespace {

TEST(SpotNotice, TheTextGivesSecondsOrAUtcTimeOrNothing) {
  const TimeMs now = 1'800'000'000'000;
  EXPECT_EQ(ParseNoticeText("", now, 120000), 120000);
  EXPECT_EQ(ParseNoticeText(" 90\n", now, 120000), 90000);
  EXPECT_EQ(ParseNoticeText(FormatUtc(now + 30 * kSecondMs), now, 120000), 30000);
  EXPECT_EQ(ParseNoticeText(FormatUtc(now - kMinuteMs), now, 120000), 0) << "a time past: now";
  EXPECT_EQ(ParseNoticeText("soon", now, 120000), std::nullopt);
  EXPECT_EQ(ParseNoticeText("-5", now, 120000), std::nullopt);
  EXPECT_EQ(ParseNoticeText("99999999", now, 120000), std::nullopt);
}

TEST(SpotNotice, ANoticeFileIsReportedOnceWithTheTimeItGives) {
  std::string file = testing::TempPath("spot-notice");
  std::filesystem::remove(file);
  testing::ReportSink sink;
  std::ostringstream log;
  SpotNoticeWatcher watcher({file, "", 50, 120000}, "spot-3", sink, log);
  watcher.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(sink.notices.empty());
  // Written whole, then moved in place: a file seen between its creation and its write is
  // an empty notice (no time given: the default), which is not what this test is about.
  std::ofstream(file + ".new") << "45\n";
  std::filesystem::rename(file + ".new", file);
  for (int i = 0; i < 100 && sink.notices.empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  watcher.Stop();
  std::lock_guard<std::mutex> lock(sink.mu);
  ASSERT_EQ(sink.notices.size(), 1u) << "one notice only";
  EXPECT_EQ(sink.notices[0].node_id, "spot-3");
  EXPECT_EQ(sink.notices[0].reclaim_in_ms, 45000);
  EXPECT_NE(log.str().find("node spot-3 is being reclaimed in 45 s"), std::string::npos);
  std::filesystem::remove(file);
}

TEST(SpotNotice, ACommandGivesANoticeWhenItSucceedsWithOutput) {
  testing::ReportSink sink;
  std::ostringstream log;
  SpotNoticeWatcher quiet({"", "exit 1", 50, 120000}, "n", sink, log);
  EXPECT_FALSE(quiet.Look());
  SpotNoticeWatcher empty({"", "true", 50, 120000}, "n", sink, log);
  EXPECT_FALSE(empty.Look());
  SpotNoticeWatcher hung({"", "sleep 20", 300, 120000}, "n", sink, log);
  EXPECT_FALSE(hung.Look()) << "a command that hangs is killed at the interval: no notice";
  SpotNoticeWatcher says({"", "echo 2099-01-01T00:00:00Z", 50, 120000}, "n", sink, log);
  auto notice = says.Look();
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->reclaim_in_ms, 24 * kHourMs) << "capped at a day";
  SpotNoticeWatcher odd({"", "echo terminate", 50, 120000}, "n", sink, log);
  notice = odd.Look();
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->reclaim_in_ms, 120000) << "a notice it cannot read: the default";
}

TEST(SpotNotice, TheNoticeTravelsInTheReportAndBadValuesAreRefusedNamingTheField) {
  AgentReport report;
  report.node_id = "spot-1";
  report.notices.push_back({"spot-1", 30000, "file /run/notice"});
  auto parsed = ParseAgentReport(AgentReportToJson(report));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->notices.size(), 1u);
  EXPECT_EQ(parsed->notices[0].reclaim_in_ms, 30000);
  EXPECT_EQ(parsed->notices[0].source, "file /run/notice");
  for (const char* bad :
       {R"({"node_id": "n", "notices": [{"reclaim_in_ms": -1}]})",
        R"({"node_id": "n", "notices": [{"reclaim_in_ms": "soon"}]})", R"({"node_id": "n", "notices": [{}]})"}) {
    auto r = ParseAgentReport(nlohmann::json::parse(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "notices[0]") << r.status().ToString();
  }
}

}  // namespace
}  // namespace gantry
