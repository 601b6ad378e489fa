// Two or more servers on one PostgreSQL store: one leads, the others stand by. The lease
// row gives one leader per term; a deposed leader's late commit is refused by the database
// (gantry_fence); a standby refuses requests with the leader's URL, takes over after a
// kill -9 within the lease and finds every acknowledged job (also through five kills
// during a submit storm, while an agent's jobs run on, each started once); a leader
// paused past its lease never writes after the take-over.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "controller_harness.h"
#include "scratch_postgres.h"
#include "server/leader_lease.h"
#include "server/store.h"
#include "server_pair.h"
#include "submit_storm.h"

namespace gantry::testing {
namespace {

using Clock = std::chrono::steady_clock;

StoreBatch OneJob(uint64_t seq) {
  StoreBatch b;
  b.jobs = {{seq, std::to_string(seq), "vision", "alice", "pending", "{}"}};
  return b;
}

TEST(LeaderLease, OneLeaderPerTermAndADeposedLeadersCommitIsRefused) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  auto store_a = OpenPostgresStore(pg.url());
  auto store_b = OpenPostgresStore(pg.url());
  ASSERT_TRUE(store_a.ok() && store_b.ok());
  auto a = LeaderLease::Open(pg.url(), "a", "http://a", 1000);
  auto b = LeaderLease::Open(pg.url(), "b", "http://b", 1000);
  ASSERT_TRUE(a.ok() && b.ok());

  auto va = (*a)->Campaign();
  ASSERT_TRUE(va.ok()) << va.status().ToString();
  EXPECT_TRUE(va->mine);
  EXPECT_EQ(va->term, 1);
  (*store_a)->SetFencingTerm(va->term);
  EXPECT_TRUE((*store_a)->Commit(OneJob(1)).ok());

  // While a's lease runs, b only learns who leads.
  auto vb = (*b)->Campaign();
  ASSERT_TRUE(vb.ok());
  EXPECT_FALSE(vb->mine);
  EXPECT_EQ(vb->leader_url, "http://a");
  EXPECT_TRUE(*(*a)->Renew());

  // a stops renewing; once its lease is over, b takes the next term.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  vb = (*b)->Campaign();
  ASSERT_TRUE(vb.ok());
  EXPECT_TRUE(vb->mine);
  EXPECT_EQ(vb->term, 2);
  (*store_b)->SetFencingTerm(vb->term);

  // a's late commit is refused by the database and writes nothing; b's goes through.
  Status late = (*store_a)->Commit(OneJob(2));
  EXPECT_FALSE(late.ok());
  EXPECT_NE(late.ToString().find("deposed"), std::string::npos) << late.ToString();
  EXPECT_TRUE((*store_b)->Commit(OneJob(3)).ok());
  auto renewed = (*a)->Renew();
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed) << "a deposed leader cannot renew";
  auto state = (*store_b)->Load();
  ASSERT_TRUE(state.ok());
  std::set<std::string> ids;
  for (const StoredJob& j : state->jobs) ids.insert(j.id);
  EXPECT_EQ(ids, (std::set<std::string>{"1", "3"}));
}

TEST(LeaderLease, ALeaderThatRenewsKeepsTheLead) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  ASSERT_TRUE(OpenPostgresStore(pg.url()).ok());  // the schema, with the leader row
  auto a = LeaderLease::Open(pg.url(), "a", "http://a", 1000);
  auto b = LeaderLease::Open(pg.url(), "b", "http://b", 1000);
  ASSERT_TRUE((*a)->Campaign()->mine);
  for (int i = 0; i < 8; ++i) {  // 2.4 s, more than two leases
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(*(*a)->Renew());
    auto vb = (*b)->Campaign();
    ASSERT_TRUE(vb.ok());
    EXPECT_FALSE(vb->mine) << "round " << i;
  }
}

TEST(LeaderLease, AServerRestartedAfterACrashTakesItsRowBackAtOnce) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  ASSERT_TRUE(OpenPostgresStore(pg.url()).ok());
  auto before = LeaderLease::Open(pg.url(), "host:data-dir-id", "http://a", 60'000);
  ASSERT_TRUE((*before)->Campaign()->mine);
  // The same server (same name) starts again while its old lease has a minute to run: it
  // need not wait, and the earlier process, were it alive, is fenced by the new term.
  auto after = LeaderLease::Open(pg.url(), "host:data-dir-id", "http://a", 60'000);
  auto v = (*after)->Campaign();
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->mine);
  EXPECT_EQ(v->term, 2);
  EXPECT_FALSE(*(*before)->Renew());
  // Another server still waits.
  auto other = LeaderLease::Open(pg.url(), "other:id", "http://b", 60'000);
  EXPECT_FALSE((*other)->Campaign()->mine);
}

// A server's /metrics (a standby's needs no token; the leader's is an admin's).
std::string Metrics(const std::string& address) {
  httplib::Client c(address);
  c.set_bearer_token_auth(kRootToken);
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

TEST(HighAvailability, AStandbyRefusesWithTheLeadersUrlAndTakesOverAfterAKillNine) {
  Pair p("ha-kill");
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  std::string standby = StandbyAddress(p.b);
  ASSERT_FALSE(standby.empty()) << "see " << p.b.dir() << "/server.log";
  auto refused = SubmitTo(standby, "to-standby");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("not the leader, leader is " + p.a.address()), std::string::npos) << refused->body;
  const std::string standing_by = Metrics(standby);
  EXPECT_NE(standing_by.find("\ngantry_leader 0\n"), std::string::npos) << standing_by;
  EXPECT_NE(standing_by.find("\ngantry_leader_term 1\n"), std::string::npos) << standing_by;
  EXPECT_NE(Metrics(p.a.address()).find("\ngantry_leader 1\n"), std::string::npos);

  std::set<std::string> acknowledged;
  for (int i = 0; i < 20; ++i) {
    auto r = SubmitTo(p.a.address(), "job-" + std::to_string(i));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    acknowledged.insert("job-" + std::to_string(i));
  }
  auto killed = Clock::now();
  p.a.Kill(SIGKILL);
  p.b.WaitReady(15);
  ASSERT_FALSE(p.b.address().empty());
  double takeover_s = std::chrono::duration<double>(Clock::now() - killed).count();
  std::printf("take-over after kill -9: %.2f s (lease 2 s)\n", takeover_s);
  EXPECT_LT(takeover_s, 6.0);
  EXPECT_EQ(p.b.address(), standby) << "the new leader serves where it stood by";
  std::string after = Metrics(p.b.address());
  EXPECT_NE(after.find("\ngantry_leader 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("\ngantry_leader_term 2\n"), std::string::npos) << after;
  EXPECT_NE(after.find("\ngantry_leader_takeovers_total 1\n"), std::string::npos) << after;
  EXPECT_EQ(JobNames(p.b.address()), acknowledged);
  // A client that retries a submit it never saw answered, with the same key, gets the same job.
  auto again = SubmitTo(p.b.address(), "job-7");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(JobNames(p.b.address()).size(), 20u);
}

TEST(HighAvailability, ALeaderStoppedCleanlyHandsOverWithoutWaitingOutItsLease) {
  // A 60 s lease: a restart, an upgrade or a node drain (SIGTERM) must not leave the
  // cluster without a leader that long.
  Pair p("ha-release", {}, "60");
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  ASSERT_FALSE(StandbyAddress(p.b).empty()) << "see " << p.b.dir() << "/server.log";
  ASSERT_EQ(SubmitTo(p.a.address(), "before-the-restart")->status, 201);
  ASSERT_TRUE(p.a.TerminateWithin(20));
  p.b.WaitReady(20);  // well inside the lease the old leader would otherwise hold
  ASSERT_FALSE(p.b.address().empty()) << "the standby waited out the lease";
  EXPECT_EQ(JobNames(p.b.address()), std::set<std::string>{"before-the-restart"});
  EXPECT_NE(Metrics(p.b.address()).find("\ngantry_leader_term 2\n"), std::string::npos);
}

TEST(HighAvailability, ALeaderPausedPastItsLeaseNeverWritesAfterTheTakeOver) {
  Pair p("ha-pause");
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  ASSERT_FALSE(StandbyAddress(p.b).empty());
  ASSERT_EQ(SubmitTo(p.a.address(), "before")->status, 201);

  p.a.Signal(SIGSTOP);  // cut off: it holds its connections but answers nothing
  p.b.WaitReady(15);
  ASSERT_FALSE(p.b.address().empty());
  ASSERT_EQ(SubmitTo(p.b.address(), "after")->status, 201);
  // A submit reaches the paused leader's socket; it resumes with that request in hand.
  std::string old_leader = p.a.address();
  std::thread late([&] {
    auto r = SubmitTo(old_leader, "late");
    EXPECT_TRUE(!r || r->status != 201) << "the deposed leader acknowledged a submit";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  p.a.Signal(SIGCONT);
  late.join();
  EXPECT_TRUE(p.a.ExitsWithin(5)) << "the deposed leader must stop";
  EXPECT_EQ(JobNames(p.b.address()), (std::set<std::string>{"before", "after"}));
}

// The ids of the running jobs, and whether every job has started at most once.
std::set<std::string> RunningJobs(const std::string& address, bool* none_started_twice) {
  httplib::Client c(address);
  c.set_bearer_token_auth(kRootToken);
  c.set_read_timeout(60);
  nlohmann::json jobs = Json(c.Get("/v1/jobs?limit=10000"));
  std::set<std::string> running;
  *none_started_twice = jobs.contains("jobs");
  for (const auto& j : jobs.value("jobs", nlohmann::json::array())) {
    if (j.value("state", "") == "running") running.insert(j.value("id", ""));
    if (j.value("runs", 0) > 1) *none_started_twice = false;
  }
  return running;
}

TEST(HighAvailability, KillingTheLeaderFiveTimesDuringASubmitStormLosesAndDoublesNothing) {
  Pair p("ha-storm", {"--node-timeout", "30"});
  ASSERT_FALSE(p.pg.url().empty());
  p.a.Start();
  p.b.Launch();
  ASSERT_FALSE(StandbyAddress(p.b).empty());
  // An agent with 4 GPUs, given both addresses: the storm's first four jobs run on it
  // (holding their GPUs for a day) through every take-over; the rest wait.
  AgentProcess agent(p.a.dir(), "node-a", "4xT4");
  agent.Start(p.server_list());
  // A storm, not a flood: 10 ms between jobs keeps each recovery quick. The clients are
  // given both addresses and find the leader themselves.
  SubmitStorm storm(3, p.urls(), kAliceToken, std::chrono::milliseconds(10));
  bool once = false;
  std::set<std::string> running;
  for (int i = 0; i < 100 && running.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = RunningJobs(p.a.address(), &once);
  }
  ASSERT_EQ(running.size(), 4u) << "see " << p.a.dir() << "/agent-node-a.log";
  ServerProcess* current = &p.a;
  ServerProcess* standby = &p.b;
  std::vector<double> takeovers;
  for (int kill = 0; kill < 5; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 100 * kill));
    auto killed = Clock::now();
    current->Kill(SIGKILL);
    standby->WaitReady(15);
    ASSERT_FALSE(standby->address().empty()) << "no take-over after kill " << kill;
    takeovers.push_back(std::chrono::duration<double>(Clock::now() - killed).count());
    current->Launch();  // back as the standby
    std::swap(current, standby);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // it stands by before the next kill
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  storm.Stop();
  const std::set<std::string>& acknowledged = storm.acknowledged();

  std::string times;
  for (double t : takeovers) times += (times.empty() ? "" : ", ") + std::to_string(t).substr(0, 4);
  std::printf("leader kill -9 storm: %zu acknowledged submits, 5 take-overs in %s s (lease 2 s)\n", acknowledged.size(),
              times.c_str());
  // Within a few leases: the lease (2 s), a campaign and the recovery of everything the
  // storm stored (1,300-1,600 jobs with the plain-HTTP client; an ASan build on 2 loaded
  // cores took up to 8.7 s). What it takes is measured in docs/OPERATIONS.md, not here.
  for (double t : takeovers) EXPECT_LT(t, 12.0);
  EXPECT_EQ(storm.refused(), 0);
  ASSERT_GT(acknowledged.size(), 30u);
  httplib::Client c(current->address());
  c.set_bearer_token_auth(kRootToken);
  c.set_read_timeout(60);
  auto r = c.Get("/v1/jobs?limit=10000");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_LT(acknowledged.size(), 10000u);
  nlohmann::json jobs = nlohmann::json::parse(r->body);
  std::map<std::string, int> by_name;
  for (const auto& j : jobs["jobs"]) by_name[j["name"].get<std::string>()]++;
  for (const std::string& key : acknowledged) EXPECT_EQ(by_name[key], 1) << key;
  for (const auto& [name, count] : by_name) EXPECT_EQ(count, 1) << name;
  // No job ran twice: the same four run on, adopted by each new leader, and no job was
  // ever started a second time (a second start is a second run).
  for (int i = 0; i < 50 && RunningJobs(current->address(), &once) != running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the agent registers with the last leader
  }
  EXPECT_EQ(RunningJobs(current->address(), &once), running);
  EXPECT_TRUE(once);
}

}  // namespace
}  // namespace gantry::testing
