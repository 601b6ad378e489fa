// Times for people in the CLI: --since/--until forms, ages, local time and UTC.
#include "client/time_display.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include "core/notify.h"
#include "test_util.h"

namespace gantry::testing {
namespace {

// Runs the test in a fixed zone, UTC+1 in November (Europe/Berlin, CET).
class LocalTime : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = getenv("TZ");
    saved_ = old ? old : "";
    had_ = old != nullptr;
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
  }
  void TearDown() override {
    if (had_) {
      setenv("TZ", saved_.c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  std::string saved_;
  bool had_ = false;
};

const TimeStyle kLocal{false, Utc("2026-11-27T12:00:00Z")};
const TimeStyle kUtc{true, Utc("2026-11-27T12:00:00Z")};

TEST_F(LocalTime, SinceAndUntilTakeWhatPeopleType) {
  EXPECT_EQ(*ParseWhen("--since", "2h", kLocal), "2026-11-27T10:00:00Z");
  EXPECT_EQ(*ParseWhen("--since", "90", kLocal), "2026-11-27T10:30:00Z");  // a bare number: minutes
  EXPECT_EQ(*ParseWhen("--since", "now", kLocal), "2026-11-27T12:00:00Z");
  EXPECT_EQ(*ParseWhen("--since", "2026-11-26", kLocal), "2026-11-25T23:00:00Z");  // local midnight
  EXPECT_EQ(*ParseWhen("--since", "2026-11-26 14:30", kLocal), "2026-11-26T13:30:00Z");
  EXPECT_EQ(*ParseWhen("--since", "2026-11-26T14:30:15", kLocal), "2026-11-26T13:30:15Z");
  EXPECT_EQ(*ParseWhen("--since", "2026-11-26T14:30:15Z", kLocal), "2026-11-26T14:30:15Z");
  EXPECT_EQ(*ParseWhen("--since", "2026-11-26 14:30", kUtc), "2026-11-26T14:30:00Z");
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-11-26 25:00", "2026-11-26 14:30 junk", "-2h"}) {
    auto w = ParseWhen("--until", bad, kLocal);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().field(), "--until") << bad;
  }
}

TEST_F(LocalTime, TimesShowLocallyOrInUtcWithTheirAge) {
  EXPECT_EQ(ShowTime("2026-11-27T11:57:00Z", kLocal), "2026-11-27 12:57:00 CET");
  EXPECT_EQ(ShowTime("2026-11-27T11:57:00Z", kUtc), "2026-11-27 11:57:00 UTC");
  EXPECT_EQ(ShowTime("", kLocal), "");
  EXPECT_EQ(Age("2026-11-27T11:57:00Z", kLocal), "3m00s ago");
  EXPECT_EQ(Age("2026-11-27T14:00:00Z", kLocal), "in 2h00m");
  EXPECT_EQ(Age("2026-11-27T12:00:00Z", kLocal), "now");
  nlohmann::json running = {{"started_at", "2026-11-27T11:00:00Z"}, {"ended_at", ""}};
  EXPECT_EQ(Elapsed(running, kLocal), "1h00m");
  nlohmann::json ended = {{"started_at", "2026-11-27T11:00:00Z"}, {"ended_at", "2026-11-27T11:00:42Z"}};
  EXPECT_EQ(Elapsed(ended, kLocal), "42s");
  EXPECT_EQ(Elapsed(nlohmann::json{{"started_at", ""}}, kLocal), "");
}

TEST(NotifySettings, EventsHostsAndAddresses) {
  EXPECT_TRUE(NotifyWants({"end"}, "fail"));  // an end includes a failure, as in Slurm
  EXPECT_FALSE(NotifyWants({"fail"}, "end"));
  EXPECT_TRUE(NotifyWants({"all"}, "preempt"));
  EXPECT_FALSE(NotifyWants({}, "end"));
  EXPECT_EQ(UrlHost("https://Hooks.Slack.com:443/services/x"), "hooks.slack.com");
  EXPECT_EQ(UrlHost("http://[::1]:8080/x"), "[::1]");
  EXPECT_TRUE(HostAllowed("ci.example.org", {"*.example.org"}));
  EXPECT_FALSE(HostAllowed("example.org", {"*.example.org"}));
  EXPECT_FALSE(HostAllowed("evilexample.org", {"*.example.org"}));
  EXPECT_FALSE(HostAllowed("example.org.evil.com", {"example.org"}));
  EXPECT_TRUE(CheckWebhookUrl("w", "https://hooks.slack.com/services/T/B/x").ok());
  EXPECT_FALSE(CheckWebhookUrl("w", "https://user@hooks.slack.com/").ok());
  EXPECT_FALSE(CheckWebhookUrl("w", "https:///path").ok());
  EXPECT_FALSE(CheckMailAddress("m", "a@b\nBcc: x@y").ok());
}

}  // namespace
}  // namespace gantry::testing
