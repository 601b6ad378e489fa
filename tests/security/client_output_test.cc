// What another tenant can put in front of an admin's terminal: text the server keeps (a
// refused request's path in the audit log) is shown by
// the CLI with its control characters made visible, so an escape sequence in it cannot
// retitle the window, write the clipboard (OSC 52) or redraw what was printed before. A
// job's own output stays as the job wrote it (colours, \r progress bars) for its team. An
// answer of a shape the client does not read is an error, not an abort.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <thread>

#include "client/terminal_safe.h"
#include "loopback.h"
#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

using TerminalOutput = ServerTest;

bool HasControlCharacter(const std::string& text) {
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
  }
  return text.find("\xc2\x9b") != std::string::npos;
}

TEST(TerminalSafe, ShowsControlCharactersAndKeepsTextAndUtf8) {
  EXPECT_EQ(TerminalSafe("a\x1b]52;c;ZXZpbA==\x07z"), "a^[]52;c;ZXZpbA==^Gz");
  EXPECT_EQ(TerminalSafe("ok\r\x7f\ttab\n"), "ok^M^?\ttab\n");
  EXPECT_EQ(TerminalSafe("csi \xc2\x9b"
                         "31m"),
            "csi <U+009B>31m");
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xc2\xa0 \xe2\x9c\x93"), "caf\xc3\xa9 \xc2\xa0 \xe2\x9c\x93");
  EXPECT_EQ(TerminalSafe("ends in \xc2"), "ends in \xc2");
  // A C1 control split across two writes is still caught, and raw writes keep their order.
  std::ostringstream target;
  TerminalSafeBuffer buffer(target.rdbuf());
  std::ostream safe(&buffer);
  safe << "x\xc2";
  safe << "\x9b"
       << "y";
  WriteRaw(safe, "\x1b[1m");
  safe << "\x1b" << std::flush;
  EXPECT_EQ(target.str(), "x<U+009B>y\x1b[1m^[");
}

TEST_F(TerminalOutput, AnEscapeSequenceInARefusedRequestReachesTheAdminAsText) {
  // A tenant's refused request: its node name is kept in the audit log as the target.
  auto alice = server_->Client(kAliceToken);
  auto r = alice.Post("/v1/nodes/%1b]52;c;ZXZpbA==%07%1b[2J%c2%9b31m/gpus/0/fault", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  int rc = 0;
  std::string out;
  for (int i = 0; i < 50 && out.find("ZXZpbA") == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    out = Cli("audit", kRootToken, &rc);
  }
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("^[]52;c;ZXZpbA==^G^[[2J<U+009B>31m"), std::string::npos) << out;
  EXPECT_FALSE(HasControlCharacter(out)) << out;
  // -o json escapes it as JSON does, past ASCII too: nothing changed for a script.
  out = Cli("audit -o json", kRootToken, &rc);
  EXPECT_NE(out.find("\\u001b]52;c;ZXZpbA==\\u0007\\u001b[2J\\u009b31m"), std::string::npos) << out;
  EXPECT_FALSE(HasControlCharacter(out)) << out;
}

TEST_F(TerminalOutput, AJobsOwnOutputIsPrintedAsItWasWritten) {
  int rc = 0;
  std::string out = Cli(R"(run -g 1 -t T4 -- printf '\033[31mred\033[0m 50%%\r100%%\n')", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\x1b[31mred\x1b[0m 50%\r100%\n"), std::string::npos) << out;
  std::string id = JobIdIn(out);
  out = Cli("logs " + id, kAliceToken, &rc);
  EXPECT_EQ(out, "\x1b[31mred\x1b[0m 50%\r100%\n");
}

// A server (or whatever answers at the address) sending JSON of another shape than the
// client reads: a clear error and exit status 1, never an abort.
TEST(ClientOutput, AnAnswerOfAnotherShapeIsAnErrorNotACrash) {
  for (const char* body : {R"({"jobs": 5})", R"({"jobs": [{"id": 7, "state": ["x"], "spec": 3}]})", R"([1, 2])",
                           R"({"jobs": [{"id": "7", "spec": {"gpu_types": [1]}}]})"}) {
    int port = 0;
    int fd = ListenOnLoopback(&port);
    ASSERT_GE(fd, 0);
    std::thread server([fd, body] {
      int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[8192];
      (void)!read(c, buf, sizeof(buf));
      std::string answer = fmt::format(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}", strlen(body), body);
      (void)!write(c, answer.data(), answer.size());
      close(c);
    });
    std::string out;
    int rc =
        RunCommand(fmt::format("GANTRY_TOKEN=t {} jobs --server http://127.0.0.1:{} 2>&1", GANTRY_BINARY, port), &out);
    shutdown(fd, SHUT_RDWR);
    close(fd);
    server.join();
    EXPECT_EQ(rc, 1) << body << ": " << out;
    EXPECT_NE(out.find("the server's answer is not what this client reads"), std::string::npos) << body << ": " << out;
  }
}

}  // namespace
}  // namespace gantry::testing
