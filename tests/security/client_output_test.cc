// What another tenant can put in front of an admin's terminal: text the server keeps (a
// refused request's path in the audit log) is shown by
// the CLI with its control characters made visible, so an escape sequence in it cannot
// retitle the window, write the clipboard (OSC 52) or redraw what was printed before. A
// job's own output stays as the job wrote it (colours, \r progress bars) for its team. An
// answer of a shape the client does not read is an error, not an abort.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "client/terminal_safe.h"
#include "loopback.h"
#include "net/http_exchange.h"
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
  EXPECT_EQ(TerminalSafe("\xf0\x9f\x9a\x80 \xe4\xb8\xad"), "\xf0\x9f\x9a\x80 \xe4\xb8\xad");
  // Bytes that are not well-formed UTF-8, which a terminal in an 8-bit locale may obey.
  EXPECT_EQ(TerminalSafe("lone \x9b"
                         "31m \x9d"
                         "52;c;x\x07"),
            "lone <0x9B>31m <0x9D>52;c;x^G");
  EXPECT_EQ(TerminalSafe("overlong \xc0\x9b"), "overlong <0xC0><0x9B>");
  EXPECT_EQ(TerminalSafe("surrogate \xed\xa0\x80"), "surrogate <0xED><0xA0><0x80>");
  EXPECT_EQ(TerminalSafe("cut \xe4\xb8 short"), "cut <0xE4><0xB8> short");
  EXPECT_EQ(TerminalSafe("ends in \xc2"), "ends in <0xC2>");
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

// Runs `gantry ARGS --server` against a server that answers every request with `answer`
// (status line and headers without Content-Length, then `body`); the CLI's output, and its
// exit status in `rc`.
std::string CliAgainst(const std::string& args, const std::string& answer, const std::string& body, int* rc) {
  int port = 0;
  int fd = ListenOnLoopback(&port);
  if (fd < 0) return "no listener";
  std::string whole = fmt::format("{}Content-Length: {}\r\n\r\n{}", answer, body.size(), body);
  std::thread server([fd, whole] {
    for (int c; (c = accept(fd, nullptr, nullptr)) >= 0;) {
      char buf[8192];
      while (read(c, buf, sizeof(buf)) > 0 && write(c, whole.data(), whole.size()) > 0) {
      }
      close(c);
    }
  });
  std::string out;
  *rc = RunCommand(
      fmt::format("GANTRY_TOKEN=t timeout 60 {} {} --server http://127.0.0.1:{} 2>&1", GANTRY_BINARY, args, port),
      &out);
  shutdown(fd, SHUT_RDWR);
  close(fd);
  server.join();
  return out;
}

// A server (or whatever answers at the address) sending JSON of another shape than the
// client reads, or nested past any answer's depth: a clear error and exit status 1, never
// an abort or gigabytes.
TEST(ClientOutput, AnAnswerOfAnotherShapeIsAnErrorNotACrash) {
  const std::string json = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
  for (const std::string& body :
       {std::string(R"({"jobs": 5})"), std::string(R"({"jobs": [{"id": 7, "state": ["x"], "spec": 3}]})"),
        std::string(R"([1, 2])"), std::string(R"({"jobs": [{"id": "7", "spec": {"gpu_types": [1]}}]})"),
        std::string(100000, '[') + std::string(100000, ']')}) {
    int rc = 0;
    std::string out = CliAgainst("jobs", json, body, &rc);
    EXPECT_EQ(rc, 1) << body.substr(0, 80) << ": " << out;
    EXPECT_NE(out.find("the server's answer is not what this client reads"), std::string::npos)
        << body.substr(0, 80) << ": " << out;
  }
  EXPECT_TRUE(ParseAnswerJson(std::string(64, '[') + std::string(64, ']')).is_array());
  EXPECT_TRUE(ParseAnswerJson(std::string(65, '[') + std::string(65, ']')).is_discarded());
  EXPECT_TRUE(
      ParseAnswerJson(R"({"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\""})").is_object())
      << "brackets in a string are text";
}

// A log answer whose headers claim two billion ranks (each pass would ask for each, deaf to
// Ctrl-C) or an offset that is not a number (an uncaught exception): an error.
TEST(ClientOutput, LogHeadersOutOfRangeAreAnError) {
  for (const char* headers : {"X-Log-Run: 1\r\nX-Log-Ranks: 2147483647\r\nX-Log-Offset: 5\r\nX-Job-State: running\r\n",
                              "X-Log-Run: 1\r\nX-Log-Ranks: 1\r\nX-Log-Offset: many\r\nX-Job-State: running\r\n"}) {
    int rc = 0;
    std::string out =
        CliAgainst("logs 7", std::string("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n") + headers, "hello\n", &rc);
    EXPECT_EQ(rc, 1) << headers << ": " << out;
    EXPECT_NE(out.find("the server's log answer is not one this client reads"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace gantry::testing
