// Interactive sessions (gantry exec, attach, shell) attacked: another team, a teammate, a
// node agent's token or no token at all reach into someone's job; hostile parameters and
// frames; an agent that tries to take another node's session or guesses a session's id;
// a user who opens sessions without end. Each is refused with the field named, audited, and
// the server and the job go on.
#include <gtest/gtest.h>

#include "server/server_fixture.h"
#include "server/session_util.h"

namespace gantry::testing {
namespace {

class SessionAttacks : public ServerTest {
 protected:
  std::string HeldGpu() {
    std::string id = JsonIn(Cli("submit -o json -g 1 -t T4 --hold-gpus 10m"))["id"];
    EXPECT_EQ(WaitFor(id, "running"), "running");
    return id;
  }
  // The refusal of an upgrade: its status and words.
  UpgradeRefusal Refusal(const std::string& path, const std::string& token) {
    UpgradeRefusal refusal;
    auto s = OpenSession(server_->address(), token, path, &refusal);
    EXPECT_FALSE(s) << path << " was opened";
    return refusal;
  }
};

TEST_F(SessionAttacks, NoOneButTheOwnerTheTeamsAdminsOrAnAdminOpensASessionInAJob) {
  std::string id = HeldGpu();
  std::string path = ExecPath(id, {"id"});
  EXPECT_EQ(Refusal(path, kBobToken).status, 404) << "another team does not even see it";
  // A teammate is another person's account: carol (vision, a plain user) is refused.
  UpgradeRefusal mate = Refusal(path, kCarolToken);
  EXPECT_EQ(mate.status, 403) << "a teammate is not the job's account";
  EXPECT_NE(mate.message.find("only its owner, its team's admins or an admin"), std::string::npos) << mate.message;
  // The team's admin answers for its jobs, audited.
  auto lead = OpenSession(server_->address(), kLeadToken, ExecPath(id, {"sh", "-c", "echo lead-here"}));
  ASSERT_TRUE(lead) << lead.status().ToString();
  SessionSeen lead_seen;
  ASSERT_TRUE(ReadFrames(**lead, lead_seen, 10000));
  EXPECT_EQ(lead_seen.out, "lead-here\n");
  EXPECT_EQ(Refusal(path, kAgentToken).status, 403);
  EXPECT_EQ(Refusal(path, "").status, 401);
  EXPECT_EQ(Refusal(path, "not-a-token").status, 401);
  auto admin = OpenSession(server_->address(), kRootToken, ExecPath(id, {"sh", "-c", "echo admin-here"}));
  ASSERT_TRUE(admin) << admin.status().ToString();
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(**admin, seen, 10000));
  EXPECT_EQ(seen.out, "admin-here\n");
  // Refusals are audited.
  std::string audit = Cli("audit --limit 50", kRootToken);
  EXPECT_NE(audit.find("403 job " + id + " is alice's: only its owner, its team's admins or an admin"),
            std::string::npos)
      << audit;
  EXPECT_NE(audit.find("session exec"), std::string::npos) << audit;
}

TEST_F(SessionAttacks, HostileParametersAreRefusedNamingTheField) {
  std::string id = HeldGpu();
  const std::string base = "/v1/jobs/" + id + "/exec";
  struct Case {
    std::string query, field;
  } cases[] = {
      {"?command=sh&command=%00rm", "command"}, {"?command=", "command"},
      {"?command=sh&tty=maybe", "tty"},         {"?command=sh&cols=0", "cols"},
      {"?command=sh&rows=99999", "rows"},       {"?command=sh&rank=-1", "rank"},
      {"?command=sh&rank=3", "rank"},           {"?command=sh&user=root", "user"},
      {"?command=sh&end_job=yes", "end_job"},
  };
  for (const Case& c : cases) {
    UpgradeRefusal r = Refusal(base + c.query, kAliceToken);
    EXPECT_EQ(r.status, 400) << c.query << ": " << r.message;
    EXPECT_EQ(r.message.rfind(c.field + ":", 0), 0u) << c.query << ": " << r.message;
  }
  std::string many = base + "?command=echo";
  for (int i = 0; i < 300; ++i) many += "&command=x";
  EXPECT_EQ(Refusal(many, kAliceToken).message.rfind("command:", 0), 0u);
  std::string huge = base + "?command=echo&command=" + std::string(9000, 'a');
  int status = Refusal(huge, kAliceToken).status;
  EXPECT_TRUE(status == 400 || status == 414) << status;
  // Without the upgrade, a plain GET is told what the endpoint is.
  auto plain = server_->Client(kAliceToken).Get(base + "?command=id");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 400);
  EXPECT_NE(plain->body.find("Upgrade"), std::string::npos) << plain->body;
  EXPECT_EQ(WaitFor(id, "running"), "running");
}

TEST_F(SessionAttacks, HostileFramesEndOnlyTheirOwnSession) {
  std::string id = HeldGpu();
  auto s = OpenSession(server_->address(), kAliceToken, ExecPath(id, {"sh", "-c", "echo ready; sleep 30"}));
  ASSERT_TRUE(s) << s.status().ToString();
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(**s, seen, 10000, [](const SessionSeen& x) { return x.out == "ready\n"; }));
  // An exit frame from the client means nothing; a frame of an unknown type or over 64 KiB
  // ends the session, saying why.
  ASSERT_TRUE(SendFrame(**s, FrameType::kExit, "0"));
  ASSERT_TRUE(SendFrame(**s, FrameType::kSignal, "KILL"));  // not a signal sessions send
  std::string bad = "Z";
  bad += std::string("\x00\x10\x00\x00", 4);
  ASSERT_TRUE((*s)->WriteAll(bad, 5000));
  ASSERT_TRUE(ReadFrames(**s, seen, 10000, [](const SessionSeen& x) { return x.closed || !x.error.empty(); }));
  EXPECT_NE(seen.error.find("cannot be read"), std::string::npos) << seen.error;
  // The job and the server go on: a new session works.
  EXPECT_EQ(WaitFor(id, "running"), "running");
  auto again = OpenSession(server_->address(), kAliceToken, ExecPath(id, {"echo", "still-here"}));
  ASSERT_TRUE(again);
  SessionSeen next;
  ASSERT_TRUE(ReadFrames(**again, next, 10000));
  EXPECT_EQ(next.out, "still-here\n");
  EXPECT_EQ(next.exit, 0);
}

TEST_F(SessionAttacks, AUserHoldsSixteenSessionsAtMost) {
  std::string id = HeldGpu();
  std::vector<std::unique_ptr<ByteStream>> open;
  for (int i = 0; i < 16; ++i) {
    auto s = OpenSession(server_->address(), kAliceToken, ExecPath(id, {"sh", "-c", "echo up; sleep 60"}));
    ASSERT_TRUE(s) << i << ": " << s.status().ToString();
    SessionSeen seen;
    ASSERT_TRUE(ReadFrames(**s, seen, 10000, [](const SessionSeen& x) { return x.out == "up\n"; }));
    open.push_back(std::move(*s));
  }
  UpgradeRefusal over = Refusal(ExecPath(id, {"true"}), kAliceToken);
  EXPECT_EQ(over.status, 429);
  EXPECT_NE(over.message.find("16 sessions open"), std::string::npos) << over.message;
  // Another user is not held back by it; a closed session gives its slot back.
  std::string bobs = JsonIn(Cli("submit -o json -g 1 -t T4 --hold-gpus 10m", kBobToken))["id"];
  ASSERT_EQ(WaitFor(bobs, "running", kBobToken), "running");
  EXPECT_TRUE(OpenSession(server_->address(), kBobToken, ExecPath(bobs, {"true"})));
  open.pop_back();
  bool reopened = false;
  for (int i = 0; i < 50 && !reopened; ++i) {
    reopened = static_cast<bool>(OpenSession(server_->address(), kAliceToken, ExecPath(id, {"true"})));
    if (!reopened) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(reopened);
}

TEST_F(SessionAttacks, ACommandCannotForgeAuditRecordsNorOpenSessionsWithoutEnd) {
  std::string id = HeldGpu();
  // A word with a line break and an escape sequence is one quoted word in the audit log.
  auto s =
      OpenSession(server_->address(), kAliceToken,
                  ExecPath(id, {"echo", "x\n2026-12-06 08:40:00 UTC  root  admin  DELETE /v1/jobs/5\x1b]0;t\x07"}));
  ASSERT_TRUE(s) << s.status().ToString();
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(**s, seen, 10000));
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=5"));
  std::string detail;
  for (const auto& row : audit["audit"]) {
    if (row.value("action", "") == "session exec") detail = row.value("detail", "");
  }
  EXPECT_NE(detail.find("echo \"x\\n2026-12-06"), std::string::npos) << detail;
  EXPECT_EQ(detail.find('\n'), std::string::npos) << detail;
  EXPECT_EQ(detail.find('\x1b'), std::string::npos) << detail;
  std::string table = Cli("audit --limit 5", kRootToken);
  EXPECT_EQ(table.find("\x1b"), std::string::npos) << table;
  // Opening and closing sessions without end is held to 60 a minute.
  int opened = 1;  // the one above
  UpgradeRefusal refusal;
  for (; opened < 70; ++opened) {
    auto quick = OpenSession(server_->address(), kAliceToken, ExecPath(id, {"true"}), &refusal);
    if (!quick) break;
    SessionSeen done;
    ReadFrames(**quick, done, 10000);
  }
  EXPECT_EQ(opened, 60);
  EXPECT_EQ(refusal.status, 429);
  EXPECT_NE(refusal.message.find("in the last minute"), std::string::npos) << refusal.message;
}

TEST_F(SessionAttacks, AShellKilledWhileItWaitsLeavesNoAllocationBehind) {
  std::string big = JsonIn(Cli("submit -o json -g 2 -t T4 --hold-gpus 10m"))["id"];
  ASSERT_EQ(WaitFor(big, "running"), "running");
  std::string out;
  RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} timeout -s TERM 3 {} shell -g 2 -t T4 -- true 2>&1",
                         server_->address(), kAliceToken, GANTRY_BINARY),
             &out);
  std::string id = JobIdIn(out);
  EXPECT_NE(out.find("job " + id + " cancelled"), std::string::npos) << out;
  EXPECT_EQ(WaitFor(id, "cancelled"), "cancelled") << out;
}

// A compromised node: its agent token cannot take another node's session, nor guess one.
class SessionAgentAttacks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("session-agents");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    std::filesystem::permissions(dir_, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    server_->Start();
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SessionAgentAttacks, AnAgentTakesOnlyItsOwnNodesSessions) {
  UpgradeRefusal refusal;
  std::string guessed = "/v1/agent/streams/" + std::string(43, 'A') + "?node=node-a";
  auto s = OpenSession(server_->address(), AgentToken("node-b"), guessed, &refusal);
  EXPECT_FALSE(s);
  EXPECT_EQ(refusal.status, 403) << refusal.message;
  auto own = OpenSession(server_->address(), AgentToken("node-a"), guessed, &refusal);
  EXPECT_FALSE(own) << "no such session";
  EXPECT_EQ(refusal.status, 404) << refusal.message;
  auto user = OpenSession(server_->address(), kAliceToken, guessed, &refusal);
  EXPECT_FALSE(user);
  EXPECT_EQ(refusal.status, 403) << refusal.message;
  auto bad_id =
      OpenSession(server_->address(), AgentToken("node-a"), "/v1/agent/streams/../../v1/jobs?node=node-a", &refusal);
  EXPECT_FALSE(bad_id);
}

}  // namespace
}  // namespace gantry::testing
