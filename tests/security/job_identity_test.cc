// Who a job runs as: never root unless its team may, never with another user's rights,
// never with the job's variables in a root process, its files its own. Each test is a
// reproducer of an attack that worked before (issue: "Safe to run for many teams").
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "agent/local_agent.h"
#include "agent/report_sink.h"
#include "security/security_util.h"
#include "server/controller_harness.h"
#include "test_util.h"

namespace gantry::testing {
namespace {

class JobIdentity : public ::testing::Test {
 protected:
  // A standalone server whose teams have no unix_account unless `teams` gives one.
  void Start(const std::string& teams) {
    std::string dir = TempPath("srv");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir);
    server_->WriteUsers(teams);
    server_->Start();
  }
  std::string Submit(const char* token, const std::string& body, int* status = nullptr) {
    auto r = server_->Client(token).Post("/v1/jobs", body, "application/json");
    if (status) *status = r ? r->status : -1;
    return Json(r).value("id", "");
  }
  std::string Logs(const std::string& id, const char* token = kAliceToken) {
    auto r = server_->Client(token).Get("/v1/jobs/" + id + "/logs");
    return r ? r->body : "";
  }
  std::string Finished(const std::string& id) {
    auto c = server_->Client(kRootToken);
    std::string state;
    for (int i = 0; i < 500; ++i) {
      state = JobField(c, id, "state");
      if (state == "succeeded" || state == "failed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return state;
  }
  std::unique_ptr<ServerProcess> server_;
};

// Before: a user without a Unix account ran as root and read the admin token.
TEST_F(JobIdentity, AUserWithoutAnAccountOnTheNodeNeverRunsAsRoot) {
  if (!IsRoot()) GTEST_SKIP() << "needs a root agent";
  Start("teams:\n  ops: {allow_root: true}\n");
  std::string token_file = server_->data_dir() + "/admin.token";
  std::string id = Submit(kAliceToken, R"({"gpu_fraction": 0.1, "command": "cat )" + token_file + R"("})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Finished(id), "failed");
  std::string reason = Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id)).value("reason", "");
  EXPECT_NE(reason.find("no Unix user 'alice'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("teams.vision.unix_account"), std::string::npos) << reason;
  std::string admin_token;
  std::ifstream(token_file) >> admin_token;
  EXPECT_EQ(Logs(id).find(admin_token), std::string::npos);
}

// With a team account, the same job runs as that account and cannot read the token.
TEST_F(JobIdentity, ATeamAccountRunsTheJobUnprivileged) {
  if (!IsRoot()) GTEST_SKIP() << "needs a root agent";
  Start("teams:\n  vision: {unix_account: nobody}\n");
  std::string token_file = server_->data_dir() + "/admin.token";
  std::string id = Submit(kAliceToken, R"({"gpu_fraction": 0.1, "command": "id -un; cat )" + token_file + R"("})");
  EXPECT_EQ(Finished(id), "failed");  // cat: Permission denied
  std::string out = Logs(id);
  EXPECT_EQ(out, "nobody\n");
  // A job of the user named root (an admin may submit it) is refused: its team may not run as root.
  int status = 0;
  std::string as_root =
      Submit(kRootToken, R"({"gpus": 1, "user": "root", "team": "vision", "command": "id"})", &status);
  ASSERT_EQ(status, 201);
  EXPECT_EQ(Finished(as_root), "failed");
  std::string reason = Json(server_->Client(kRootToken).Get("/v1/jobs/" + as_root)).value("reason", "");
  EXPECT_NE(reason.find("refused to run as root"), std::string::npos) << reason;
}

// Before: {"env": {"LD_PRELOAD": ...}} reached the root shim.
TEST_F(JobIdentity, LoaderAndGantryVariablesAreRefusedAtSubmit) {
  Start(kTestTeams);
  for (const char* var : {"LD_PRELOAD", "LD_LIBRARY_PATH", "GCONV_PATH", "CUDA_VISIBLE_DEVICES", "GANTRY_JOB_ID",
                          "CUDA_MPS_PIPE_DIRECTORY"}) {
    int status = 0;
    auto r = server_->Client(kAliceToken)
                 .Post("/v1/jobs", fmt::format(R"({{"gpus": 1, "command": "true", "env": {{"{}": "x"}}}})", var),
                       "application/json");
    ASSERT_TRUE(r);
    status = r->status;
    EXPECT_EQ(status, 400) << var;
    EXPECT_EQ(Json(r)["error"]["field"], std::string("env.") + var) << r->body;
  }
}

// Runs one job on an in-process agent as this test's own account; returns its stdout.
std::string RunOnAgent(const std::string& id, JobSpec spec, int* code) {
  std::string dir = TempPath("agent-" + id);
  std::filesystem::remove_all(dir);
  ReportSink reports;
  LocalAgent agent(LocalAgentOptions{.state_dir = dir, .shim = GANTRY_BINARY, .poll_ms = 20}, reports);
  agent.Serve();
  StartOrder o;
  o.job_id = id;
  o.spec = std::make_shared<const JobSpec>(std::move(spec));
  o.node_id = o.leader_node = "n1";
  RunAsThisAccount(o);  // the same account: the job may read its shim's environment
  agent.Start(o);
  *code = reports.WaitExit(id);
  std::ifstream in(agent.JobDir(id) + "/run-1/rank-0.stdout.log");
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// The job's variables are applied in the job, after the switch of user: the shim (root on
// a root agent) never has them.
TEST(JobShim, TheShimNeverSeesTheJobsEnvironment) {
  JobSpec spec = MakeJob("env1").spec();
  spec.env = {{"JOB_SECRET", "s3cret"}, {"LD_PRELOAD", "/nonexistent/evil.so"}};
  // The shim is the job's parent: its environment must hold neither variable.
  spec.command = "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c -e JOB_SECRET -e LD_PRELOAD; echo job:$JOB_SECRET";
  int code = 0;
  EXPECT_EQ(RunOnAgent("env1", spec, &code), "0\njob:s3cret\n");
  EXPECT_EQ(code, 0);
}

// The agent ignores SIGPIPE; its jobs must not inherit that (pipelines would not end).
TEST(JobShim, AJobGetsTheDefaultSigpipe) {
  JobSpec spec = MakeJob("pipe1").spec();
  spec.command = "grep SigIgn /proc/self/status";
  signal(SIGPIPE, SIG_IGN);  // as in the server and agent
  int code = 0;
  std::string out = RunOnAgent("pipe1", spec, &code);
  ASSERT_EQ(out.rfind("SigIgn:", 0), 0u) << out;
  uint64_t ignored = std::stoull(out.substr(out.find_first_not_of(" \t", 7)), nullptr, 16);
  EXPECT_EQ(ignored & (uint64_t{1} << (SIGPIPE - 1)), 0u) << out;
}

// Before: a team admin submitted as root, as other teams' users, as anyone.
TEST_F(JobIdentity, TeamAdminsSubmitOnlyForTheirTeamsKnownUsers) {
  Start(kTestTeams);
  auto lead = server_->Client(kLeadToken);
  for (const char* user : {"root", "bob", "postgres", "no-such-user"}) {
    auto r =
        lead.Post("/v1/jobs", fmt::format(R"({{"gpus": 1, "user": "{}", "command": "id"}})", user), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << user << ": " << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], "user") << r->body;
  }
  auto ok = lead.Post("/v1/jobs", R"({"gpus": 1, "user": "alice", "command": "true"})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(Json(ok)["user"], "alice");
  EXPECT_EQ(Json(ok)["team"], "vision");
  // Plain users submit only as themselves.
  auto r = server_->Client(kAliceToken)
               .Post("/v1/jobs", R"({"gpus": 1, "user": "lead", "command": "id"})", "application/json");
  EXPECT_EQ(r->status, 403);
  // Refusals are audited.
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=20"));
  int refused = 0;
  for (const auto& e : audit["audit"]) refused += e.value("status", 0) == 403 && e.value("user", "") == "lead";
  EXPECT_EQ(refused, 4) << audit.dump();
}

// Before: directories were 0755 and files 0644; another team's job read a checkpoint.
TEST_F(JobIdentity, AJobsDirectoriesAndFilesAreItsUsersAlone) {
  if (!IsRoot()) GTEST_SKIP() << "needs a root agent";
  if (!getpwnam("daemon")) GTEST_SKIP() << "needs the daemon account";
  Start("teams:\n  vision: {unix_account: nobody}\n  nlp: {unix_account: daemon}\n");
  std::string writer = Submit(
      kAliceToken,
      R"({"gpus": 1, "command": "echo weights > $GANTRY_CHECKPOINT_DIR/model.pt; echo $GANTRY_CHECKPOINT_DIR"})");
  ASSERT_EQ(Finished(writer), "succeeded");
  std::string checkpoint = Logs(writer);
  checkpoint.pop_back();
  struct stat st {};
  ASSERT_EQ(stat(checkpoint.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, getpwnam("nobody")->pw_uid);
  ASSERT_EQ(stat((checkpoint + "/model.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string reader =
      Submit(kBobToken, R"({"gpus": 1, "command": "cat )" + checkpoint + R"(/model.pt || echo refused"})");
  ASSERT_EQ(Finished(reader), "succeeded");
  EXPECT_EQ(Logs(reader, kBobToken), "refused\n");
  // The logs are the agent's, 0600: a job cannot swap them for a link to a secret.
  ASSERT_EQ(stat((std::filesystem::path(checkpoint).parent_path() / "run-1/rank-0.stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
}

// Before: the working directory was entered as root, so a job read another account's
// files below its private (0700) directory through a world-readable one inside it. Now it
// is entered as the job's account; one it may not enter is left for /tmp, saying so.
TEST_F(JobIdentity, AWorkingDirectoryIsEnteredWithTheJobsRightsOnly) {
  if (!IsRoot()) GTEST_SKIP() << "needs a root agent";
  Start("teams:\n  vision: {unix_account: nobody}\n");
  namespace fs = std::filesystem;
  std::string home = TempPath("private-home");
  fs::remove_all(home);
  fs::create_directories(home + "/project");
  std::ofstream(home + "/project/notes.txt") << "the other account's secret\n";
  fs::permissions(home, fs::perms::owner_all);  // 0700, root's: nobody may not pass
  fs::permissions(home + "/project", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                         fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(home + "/project/notes.txt",
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  std::string id =
      Submit(kAliceToken, R"({"gpus": 1, "working_dir": ")" + home + R"(/project", "command": "cat notes.txt"})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Finished(id), "failed");
  EXPECT_EQ(Logs(id).find("secret"), std::string::npos) << Logs(id);
  auto err = server_->Client(kAliceToken).Get("/v1/jobs/" + id + "/logs?stream=stderr");
  ASSERT_TRUE(err);
  EXPECT_NE(err->body.find("cannot enter the working directory " + home +
                           "/project: Permission denied; running in /tmp instead"),
            std::string::npos)
      << err->body;
  // It runs elsewhere, as a Slurm step does (the CLI gives the submitter's own directory,
  // which the team's account may not reach): /tmp, and still nothing of the secret.
  std::string elsewhere =
      Submit(kAliceToken, R"({"gpus": 1, "working_dir": ")" + home + R"(/project", "command": "pwd; cat notes.txt"})");
  EXPECT_EQ(Finished(elsewhere), "failed");
  EXPECT_EQ(Logs(elsewhere), "/tmp\n");
  // A directory the account may enter is its working directory as before.
  std::string open = TempPath("open-project");
  fs::remove_all(open);
  fs::create_directories(open);
  std::string pwd = Submit(kAliceToken, R"({"gpus": 1, "working_dir": ")" + open + R"(", "command": "pwd"})");
  EXPECT_EQ(Finished(pwd), "succeeded");
  EXPECT_EQ(Logs(pwd), open + "\n");
}

}  // namespace
}  // namespace gantry::testing
