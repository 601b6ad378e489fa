// A network partition between the leader and PostgreSQL: the leader reaches the database
// through a proxy the test freezes (connections stay open, no byte passes, no reset). Its
// lease renewals hang; it steps down by itself within the lease, a standby takes over, a
// submit sent to the cut-off leader is never acknowledged, and when the link comes back
// whatever the old leader had in flight writes nothing.
#include <gtest/gtest.h>

#include <chrono>

#include "server_pair.h"
#include "tcp_proxy.h"

namespace gantry::testing {
namespace {

using Clock = std::chrono::steady_clock;

// postgresql://user@host:PORT/db with another port.
std::string WithPort(const std::string& url, int port) {
  size_t colon = url.rfind(':');
  size_t slash = url.find('/', colon);
  return url.substr(0, colon + 1) + std::to_string(port) + url.substr(slash);
}

int PortOf(const std::string& url) {
  size_t colon = url.rfind(':');
  return std::atoi(url.substr(colon + 1).c_str());
}

TEST(HighAvailability, ALeaderCutOffFromPostgresStepsDownAndNeverWritesAfterTheTakeOver) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  TcpProxy link(PortOf(pg.url()));
  ServerProcess a(Pair::Fresh("ha-cut-a"), ""), b(Pair::Fresh("ha-cut-b"), "");
  a.AddArgs({"--db", WithPort(pg.url(), link.port()), "--leader-lease", "2"});
  b.AddArgs({"--db", pg.url(), "--leader-lease", "2"});
  a.Start();
  b.Launch();
  ASSERT_FALSE(StandbyAddress(b).empty());
  ASSERT_EQ(SubmitTo(a.address(), "before")->status, 201);

  link.Freeze();
  auto cut = Clock::now();
  // The cut-off leader cannot commit, so it cannot acknowledge.
  std::thread late([&] {
    auto r = SubmitTo(a.address(), "cut-off");
    EXPECT_TRUE(!r || r->status != 201) << "a leader cut off from the store acknowledged a submit";
  });
  EXPECT_TRUE(a.ExitsWithin(8)) << "the cut-off leader must step down by itself";
  double stepped_down_s = std::chrono::duration<double>(Clock::now() - cut).count();
  b.WaitReady(15);
  ASSERT_FALSE(b.address().empty());
  double takeover_s = std::chrono::duration<double>(Clock::now() - cut).count();
  std::printf("partition: the old leader stepped down %.2f s after the cut, the standby led after %.2f s (lease 2 s)\n",
              stepped_down_s, takeover_s);
  EXPECT_LT(takeover_s, 6.0);
  ASSERT_EQ(SubmitTo(b.address(), "after")->status, 201);

  link.Thaw();  // what the old leader had sent reaches PostgreSQL now
  late.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(JobNames(b.address()), (std::set<std::string>{"before", "after"}));
  std::ifstream log(a.dir() + "/server.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("lost the leadership (term 1): no renewal for a whole lease"), std::string::npos) << text;
}

}  // namespace
}  // namespace gantry::testing
