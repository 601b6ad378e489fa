// The CLI's own documentation, generated from its definitions: `gantry help CMD` with
// examples, bash completion that completes commands and each command's flags, and man
// pages that groff reads without a warning.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "command_util.h"
#include "loopback.h"
#include "test_util.h"

namespace gantry::testing {
namespace {

std::string Gantry(const std::string& args, int* rc = nullptr) {
  std::string out;
  int status = RunCommand(std::string(GANTRY_BINARY) + " " + args + " 2>&1", &out);
  if (rc) *rc = status;
  return out;
}

TEST(CliDocs, HelpNamesACommandAndShowsItsExamples) {
  int rc = 0;
  std::string out = Gantry("help submit", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("Usage: gantry submit"), std::string::npos) << out;
  EXPECT_NE(out.find("--hold-gpus"), std::string::npos) << out;
  EXPECT_NE(out.find("Examples:\n  gantry submit -g 2"), std::string::npos) << out;
  EXPECT_EQ(Gantry("submit --help"), out);  // the same text either way
  out = Gantry("help nosuch", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("no command 'nosuch'"), std::string::npos) << out;
  out = Gantry("help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("gantry help COMMAND"), std::string::npos) << out;
}

// `gantry CMD ...` defines CMD's flags alone (a quick start); what a user sees is the same
// as with every command defined.
TEST(CliDocs, ACommandNamedFirstParsesAsWithEveryCommandDefined) {
  int rc = 0;
  EXPECT_EQ(Gantry("--version", &rc), "gantry 0.1.0\n");
  EXPECT_EQ(rc, 0);
  std::string out = Gantry("jobs --help", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("--since"), std::string::npos) << out;
  EXPECT_EQ(out.find("--hold-gpus"), std::string::npos) << out;  // submit's, not jobs'
  out = Gantry("jobs --nosuch", &rc);
  EXPECT_EQ(rc, 2);  // a usage error, as an unknown command
  EXPECT_NE(out.find("not expected: --nosuch"), std::string::npos) << out;
  out = Gantry("submt -g 1", &rc);  // not a command
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("gantry: no command 'submt' (gantry help lists them)"), std::string::npos) << out;
  out = Gantry("sim --help", &rc);  // a daemon command: gantryd answers
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("--trace"), std::string::npos) << out;
}

TEST(CliDocs, TheLeanClientAloneSaysWhatAnHttpsCallOrADaemonCommandNeeds) {
  // gantry copied somewhere without gantryd beside it or on PATH.
  std::string dir = ::testing::TempDir() + "gantry-lean-client-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(GANTRY_BINARY, dir + "/gantry");
  std::string env = "env -i PATH=/usr/bin:/bin GANTRY_TOKEN=t " + dir + "/gantry ";
  std::string out;
  EXPECT_EQ(RunCommand(env + "queue --server https://127.0.0.1:1 2>&1", &out), 127) << out;
  EXPECT_NE(out.find("calls to an https:// server are made by gantryd"), std::string::npos) << out;
  EXPECT_NE(out.find("install it beside gantry"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(env + "token --user a --team b 2>&1", &out), 127) << out;
  EXPECT_NE(out.find("token is run by gantryd"), std::string::npos) << out;
  // Plain HTTP needs nothing else: an unreachable server is its own error.
  EXPECT_EQ(RunCommand(env + "queue --server http://127.0.0.1:1 2>&1", &out), 1) << out;
  EXPECT_NE(out.find("connection refused or unreachable"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(CliDocs, TokensUsersYamlLineIsOneEntryWhateverTheNamesHold) {
  int rc = 0;
  std::string out = Gantry("token --user 'eve, role: admin, token_sha256: x}\n  - {name: eve2' --team vision", &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string entries = "users:\n" + out.substr(out.find("users.yaml entry:\n") + 18);
  YAML::Node users = YAML::Load(entries)["users"];
  ASSERT_EQ(users.size(), 1u) << entries;
  EXPECT_EQ(users[0]["name"].as<std::string>(), "eve, role: admin, token_sha256: x}\n  - {name: eve2");
  EXPECT_EQ(users[0]["role"].as<std::string>(), "user");
}

TEST(CliDocs, WithHomeUnsetNoTokenIsTakenFromTheCallersDirectory) {
  // A directory someone else prepared, with a token where the default data directory would
  // be relative to it, and a server that records what it is sent.
  std::string dir = ::testing::TempDir() + "gantry-no-home-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/.local/share/gantry");
  std::ofstream(dir + "/.local/share/gantry/admin.token") << "gtk_planted_token\n";
  int port = 0;
  int fd = ListenOnLoopback(&port);
  ASSERT_GE(fd, 0);
  std::string request;
  std::thread server([&] {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) return;
    char buf[8192];
    ssize_t n = read(c, buf, sizeof(buf));
    if (n > 0) request.assign(buf, static_cast<size_t>(n));
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    (void)!write(c, answer.data(), answer.size());
    close(c);
  });
  std::string out;
  RunCommand(fmt::format("cd {} && env -i PATH=/usr/bin:/bin {} queue --server http://127.0.0.1:{} 2>&1", dir,
                         GANTRY_BINARY, port),
             &out);
  shutdown(fd, SHUT_RDWR);
  close(fd);
  server.join();
  EXPECT_EQ(request.find("gtk_planted_token"), std::string::npos) << request;
  std::filesystem::remove_all(dir);
}

// Asks the generated bash function for the words that complete `line`.
std::string Complete(const std::string& words, int cword) {
  std::string out;
  std::string script = std::string("source <(") + GANTRY_BINARY + " completion bash); COMP_WORDS=(" + words +
                       "); COMP_CWORD=" + std::to_string(cword) + "; _gantry; echo \"${COMPREPLY[*]}\"";
  RunCommand("bash -c '" + script + "'", &out);
  return out;
}

TEST(CliDocs, BashCompletesCommandsAndTheirFlags) {
  EXPECT_EQ(Complete("gantry sub", 1), "submit\n");
  EXPECT_EQ(Complete("gantry submit --mail", 2), "--mail-type --mail-user\n");
  EXPECT_EQ(Complete("gantry jobs --si", 2), "--since\n");
  EXPECT_EQ(Complete("gantry help que", 2), "queue\n");
  EXPECT_EQ(Complete("gantry run -g 1 -- --he", 5), "\n");  // after --: the job's own words
  // Every flag of every command is in the script.
  std::string script = Gantry("completion bash");
  for (const char* flag : {"--hold-gpus", "--notify-format", "--public-url", "--array", "--dependency", "--utc"}) {
    EXPECT_NE(script.find(flag), std::string::npos) << flag;
  }
  std::string zsh = Gantry("completion zsh");
  EXPECT_EQ(zsh.rfind("#compdef gantry\n", 0), 0u);
}

TEST(CliDocs, ManPagesForEveryCommand) {
  std::string dir = ::testing::TempDir() + "gantry-man-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  int rc = 0;
  std::string out = Gantry("man --dir " + dir, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/gantry.1"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/gantry-submit.1"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/gantry-wait.1"));
  std::string page = Gantry("man submit");
  EXPECT_EQ(page.rfind(".TH GANTRY-SUBMIT 1", 0), 0u) << page;
  EXPECT_NE(page.find("\\fB\\-\\-hold\\-gpus\\fR \\fITEXT\\fR"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH EXAMPLES"), std::string::npos);
  if (RunCommand("command -v groff >/dev/null", &out) == 0) {
    for (const char* name : {"gantry.1", "gantry-submit.1", "gantry-server.1"}) {
      std::string warnings;
      RunCommand("groff -man -ww -z " + dir + "/" + name + " 2>&1", &warnings);
      EXPECT_EQ(warnings, "") << name;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry::testing
