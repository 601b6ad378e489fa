// Login nodes: two Unix accounts made by the test submit with no token through
// `gantry login-node`, each job runs as its own account, and neither can get the other's
// session: not by what it sends the socket, not with its own token at the server, not with
// a system account. The login node's own token opens nothing else.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "command_util.h"
#include "server/server_process.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;

constexpr const char* kLoginNodeToken = "login-node-token-login1";
constexpr const char* kAnn = "gtln-ann";  // in gtln-vision
constexpr const char* kBen = "gtln-ben";  // in gtln-nlp
constexpr const char* kSys = "gtln-sys";  // a system account (uid below 1000)

std::string Sh(const std::string& cmd) {
  std::string out;
  RunCommand(cmd + " 2>&1", &out);
  return out;
}

class LoginNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "makes Unix accounts: needs root";
    TearDownAccounts();
    Sh("groupadd gtln-vision; groupadd gtln-nlp; groupadd gtln-admins");
    Sh(std::string("useradd -M -N -g gtln-vision -G gtln-admins ") + kAnn);
    Sh(std::string("useradd -M -N -g gtln-nlp ") + kBen);
    Sh(std::string("useradd -r -M -N -g gtln-vision ") + kSys);
    // Everything the accounts touch lives in a directory they can reach (the checkout may
    // sit under a 0700 /root): the lean client, the socket, their homes.
    dir_ = fs::temp_directory_path() / fmt::format("gantry-login-node-{}", ::getpid());
    fs::create_directories(dir_);
    fs::copy_file(GANTRY_BINARY, dir_ / "gantry", fs::copy_options::overwrite_existing);
    ::chmod(dir_.c_str(), 0755);
    for (const char* user : {kAnn, kBen, kSys}) {
      fs::create_directories(dir_ / user);
      Sh(fmt::format("chown {}: {}", user, (dir_ / user).string()));
    }
    server_ = std::make_unique<testing::ServerProcess>((dir_ / "server").string());
    std::ofstream(dir_ / "server/config/users.yaml", std::ios::app)
        << "  - {name: login1, team: ops, role: login-node, token_sha256: " << Sha256Hex(kLoginNodeToken) << "}\n";
    std::ofstream(dir_ / "server/config/identity.yaml") << "login_nodes:\n"
                                                        << "  groups:\n"
                                                        << "    gtln-vision: {team: vision}\n"
                                                        << "    gtln-nlp: {team: nlp}\n"
                                                        << "    gtln-admins: {team: ops, role: admin}\n";
    server_->Start();
    std::ofstream(dir_ / "host.token") << kLoginNodeToken << "\n";
    ::chmod((dir_ / "host.token").c_str(), 0600);
    socket_ = (dir_ / "run/login.sock").string();
    service_ = fork();
    if (service_ == 0) {
      std::string log = (dir_ / "login-node.log").string();
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      execl(GANTRY_BINARY, GANTRY_BINARY, "login-node", "--server", server_->address().c_str(), "--token-file",
            (dir_ / "host.token").c_str(), "--socket", socket_.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(socket_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(fs::exists(socket_)) << Sh("cat " + (dir_ / "login-node.log").string());
  }

  void TearDown() override {
    if (service_ > 0) {
      kill(service_, SIGTERM);
      waitpid(service_, nullptr, 0);
    }
    server_.reset();
    TearDownAccounts();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  static void TearDownAccounts() {
    Sh(
        fmt::format("userdel {0}; userdel {1}; userdel {2}; groupdel gtln-vision; groupdel gtln-nlp; "
                    "groupdel gtln-admins",
                    kAnn, kBen, kSys));
  }

  // `gantry ARGS` run as Unix user `user`, with no token: the login node's socket only.
  int AsUser(const std::string& user, const std::string& args, std::string* out) {
    return RunCommand(fmt::format("cd {0}/{1} && runuser -u {1} -- env -i PATH=/usr/bin:/bin HOME={0}/{1} "
                                  "GANTRY_SERVER={2} GANTRY_LOGIN_SOCKET={3} {0}/gantry {4} 2>&1",
                                  dir_.string(), user, server_->address(), socket_, args),
                      out);
  }

  httplib::Result Call(const std::string& method, const std::string& path, const std::string& token,
                       const nlohmann::json& body = nullptr) {
    httplib::Client c(server_->address());
    httplib::Headers h = {{"Authorization", "Bearer " + token}};
    if (method == "GET") return c.Get(path, h);
    return c.Post(path, h, body.is_null() ? "" : body.dump(), "application/json");
  }

  // The session the socket gives `user` (its JSON answer); `send` is written first.
  nlohmann::json SocketAnswer(const std::string& user, const std::string& send = "") {
    std::string out;
    RunCommand(fmt::format("runuser -u {} -- python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); "
                           "s.connect('{}'); s.sendall(sys.argv[1].encode()); print(s.makefile().read())\" '{}'",
                           user, socket_, send),
               &out);
    return nlohmann::json::parse(out, nullptr, false);
  }

  fs::path dir_;
  std::string socket_;
  std::unique_ptr<testing::ServerProcess> server_;
  pid_t service_ = -1;
};

TEST_F(LoginNodeTest, EachAccountSubmitsWithoutATokenAndItsJobRunsAsIt) {
  for (auto [user, team] : {std::pair{kAnn, "vision"}, std::pair{kBen, "nlp"}}) {
    std::string out;
    ASSERT_EQ(AsUser(user, "submit --gpus 1 -o json -- id -un", &out), 0) << out;
    std::string id = nlohmann::json::parse(out)["id"];
    nlohmann::json job;
    for (int i = 0; i < 150; ++i) {
      job = nlohmann::json::parse(Call("GET", "/v1/jobs/" + id, testing::kRootToken)->body);
      if (job["state"] == "succeeded" || job["state"] == "failed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(job["user"], user);
    EXPECT_EQ(job["team"], team);
    ASSERT_EQ(job["state"], "succeeded") << job.dump();
    EXPECT_EQ(Call("GET", "/v1/jobs/" + id + "/logs", testing::kRootToken)->body, std::string(user) + "\n");
    out.clear();
    ASSERT_EQ(AsUser(user, "whoami", &out), 0) << out;
    EXPECT_EQ(out, fmt::format("{} (team {}, role user)\n", user, team));
  }
}

TEST_F(LoginNodeTest, WhatAClientSendsTheSocketCannotChooseTheAccount) {
  // A forged client asks for the other account: the answer is the caller's own session.
  nlohmann::json answer = SocketAnswer(kAnn, R"({"user": "gtln-ben", "uid": 0, "groups": ["gtln-nlp"]})");
  ASSERT_TRUE(answer.is_object()) << answer.dump();
  EXPECT_EQ(answer["user"], kAnn);
  EXPECT_EQ(answer["team"], "vision");
  EXPECT_FALSE(answer.value("admin", true)) << "an admin group gives no admin through a login node by default";
  // With that session at the server, the account can neither mint another session nor see
  // the other team.
  std::string token = answer["access_token"];
  auto minted = Call("POST", "/v1/auth/login-node", token, {{"user", kBen}, {"uid", 60000}, {"groups", {"gtln-nlp"}}});
  EXPECT_EQ(minted->status, 403) << minted->body;
  auto bobs = Call("POST", "/v1/jobs", testing::kBobToken, {{"gpus", 1}, {"command", "sleep 30"}});
  ASSERT_EQ(bobs->status, 201) << bobs->body;
  std::string nlp_job = nlohmann::json::parse(bobs->body)["id"];
  EXPECT_EQ(nlohmann::json::parse(Call("GET", "/v1/jobs?team=nlp", token)->body)["total"], 0);
  EXPECT_EQ(Call("GET", "/v1/jobs/" + nlp_job, token)->status, 404);
  // A system account gets nothing.
  nlohmann::json sys = SocketAnswer(kSys);
  EXPECT_NE(sys.value("error", "").find("below login_nodes.min_uid"), std::string::npos) << sys.dump();
}

TEST_F(LoginNodeTest, TheHostTokenOnlyAsksForSessionsOfItsUsersWithinTheRules) {
  // It opens no other endpoint.
  auto jobs = Call("GET", "/v1/jobs", kLoginNodeToken);
  EXPECT_EQ(jobs->status, 403) << jobs->body;
  EXPECT_NE(jobs->body.find("a login node's token may use /v1/auth/login-node only"), std::string::npos);
  // Root, system uids, names that are not Unix names, and groups mapped to no team: refused.
  auto root = Call("POST", "/v1/auth/login-node", kLoginNodeToken, {{"user", "root"}, {"uid", 0}});
  EXPECT_EQ(root->status, 400) << root->body;
  auto system = Call("POST", "/v1/auth/login-node", kLoginNodeToken,
                     {{"user", "daemon"}, {"uid", 1}, {"groups", {"gtln-vision"}}});
  EXPECT_EQ(system->status, 403) << system->body;
  auto odd = Call("POST", "/v1/auth/login-node", kLoginNodeToken, {{"user", "a;b"}, {"uid", 5000}});
  EXPECT_EQ(odd->status, 400) << odd->body;
  auto nogroup =
      Call("POST", "/v1/auth/login-node", kLoginNodeToken, {{"user", "someone"}, {"uid", 5000}, {"groups", {"staff"}}});
  EXPECT_EQ(nogroup->status, 403) << nogroup->body;
  // Without the host token, nobody asks.
  auto anonymous = Call("POST", "/v1/auth/login-node", "", {{"user", kAnn}, {"uid", 5000}});
  EXPECT_EQ(anonymous->status, 401) << anonymous->body;
  // Each session asked for is audited with the host it came through.
  auto audit = nlohmann::json::parse(Call("GET", "/v1/audit?limit=50", testing::kRootToken)->body);
  bool refused_system = false;
  for (const auto& row : audit["audit"]) {
    refused_system = refused_system || (row["action"] == "sign-in login-node login1" && row["user"] == "daemon" &&
                                        row["outcome"] == "forbidden");
  }
  EXPECT_TRUE(refused_system) << audit.dump(1);
}

}  // namespace
}  // namespace gantry
