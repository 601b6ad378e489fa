// The port proxy's rewriting alone: the job's answer head as the browser gets it (hostile
// heads refused), the cookies the job gets, and who listens on a port per /proc/net/tcp.
#include "server/port_proxy_http.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/port_session.h"
#include "core/local_listener.h"
#include "server/controller_harness.h"

namespace gantry {
namespace {

constexpr char kPrefix[] = "/jobs/7/ports/web/";

TEST(PortProxyHttp, AnswerHeadsLoseGantrysCookiesAndKeepAlive) {
  auto a = BrowserAnswerHead(
      "HTTP/1.1 200 OK\r\nSet-Cookie: gantry_port=x; Path=/\r\nSet-Cookie: GANTRY_other=1\r\nSet-Cookie: app=1\r\n"
      "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n",
      false, kPrefix);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->head,
            "HTTP/1.1 200 OK\r\nSet-Cookie: app=1; Path=/jobs/7/ports/web/\r\nContent-Length: 2\r\nConnection: "
            "close\r\n\r\n");
  auto up = BrowserAnswerHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                              true, kPrefix);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 101);
  EXPECT_NE(up->head.find("Connection: Upgrade\r\n"), std::string::npos);
  EXPECT_EQ(up->head.find("close"), std::string::npos);
  EXPECT_EQ(BrowserAnswerHead("HTTP/1.0 204 No Content\r\n\r\n", false, kPrefix)->head,
            "HTTP/1.0 204 No Content\r\nConnection: close\r\n\r\n");
}

TEST(PortProxyHttp, HostileAnswerHeadsAreRefused) {
  for (const char* head :
       {"garbage\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "HTTP/1.1 099 Early\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: 1\r\n",  // no blank line
        "HTTP/1.0 103 Early\r(Link: x\r\n\r\n", "HTTP/1.1 200 OK\r\nX: a\nSet-Cookie: gantry_port=1\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"}) {
    EXPECT_FALSE(BrowserAnswerHead(head, false, kPrefix)) << head;  // the 101: not asked for
  }
}

TEST(PortProxyHttp, AJobsCookiesStayInsideItsPortsPath) {
  auto cookies = [](const std::string& set) {
    auto a = BrowserAnswerHead("HTTP/1.1 200 OK\r\n" + set + "\r\n\r\n", false, kPrefix);
    return a ? a->head : "refused";
  };
  const std::string ok = "HTTP/1.1 200 OK\r\n";
  EXPECT_EQ(cookies("Set-Cookie: _xsrf=1; Path=/jobs/7/ports/web/lab; HttpOnly"),
            ok + "Set-Cookie: _xsrf=1; Path=/jobs/7/ports/web/lab; HttpOnly\r\nConnection: close\r\n\r\n");
  // Paths outside the prefix (the dashboard's, another port's, a climb out) become the prefix.
  for (const char* path : {"/", "/v1/auth/refresh", "/jobs/8/ports/web/", "/jobs/7/ports/web/../../8/"}) {
    EXPECT_EQ(cookies(std::string("Set-Cookie: a=1; Path=") + path),
              ok + "Set-Cookie: a=1; Path=/jobs/7/ports/web/\r\nConnection: close\r\n\r\n")
        << path;
  }
  EXPECT_EQ(cookies("Set-Cookie: a=1"), ok + "Set-Cookie: a=1; Path=/jobs/7/ports/web/\r\nConnection: close\r\n\r\n");
  // A Domain, no name, or Gantry's names: dropped.
  for (const char* set : {"Set-Cookie: a=1; Domain=example.org", "Set-Cookie: =gantry_port=x; Path=/jobs/",
                          "Set-Cookie: gantry_refresh=x; Path=/v1/auth/refresh", "Set-Cookie: noequals"}) {
    EXPECT_EQ(cookies(set), ok + "Connection: close\r\n\r\n") << set;
  }
}

TEST(PortProxyHttp, TheJobGetsItsOwnCookiesOnly) {
  EXPECT_EQ(CookiesForUpstream("gantry_port=abc; _xsrf=2|x; Gantry_Other=1;username-host=\"q\""),
            "_xsrf=2|x; username-host=\"q\"");
  EXPECT_EQ(CookiesForUpstream("gantry_port=abc"), "");
  EXPECT_EQ(CookiesForUpstream(""), "");
}

TEST(PortSession, ListenersAreFoundWithTheirAccounts) {
  std::string dir = testing::TempPath("proc-net");
  std::filesystem::create_directories(dir);
  // Port 0x4E21 = 20001: listened on by uid 65534 on 127.0.0.1 and uid 0 on [::]; 20002 only
  // connected (state 01), not listened on.
  std::ofstream(dir + "/tcp")
      << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      << "   0: 0100007F:4E21 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 1 1 0 100 0 0 10 "
         "0\n"
      << "   1: 0100007F:4E22 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 20 4 30 10 "
         "-1\n";
  std::ofstream(dir + "/tcp6")
      << "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
         "tm->when retrnsmt   uid  timeout inode\n"
      << "   0: 00000000000000000000000000000000:4E21 00000000000000000000000000000000:0000 0A 00000000:00000000 "
         "00:00000000 00000000     0        0 3 1 0 100 0 0 10 0\n";
  EXPECT_EQ(LoopbackListenerUids(20001, dir), (std::vector<uid_t>{65534, 0}));
  EXPECT_TRUE(LoopbackListenerUids(20002, dir).empty());
  EXPECT_EQ(CheckPortListener(dir, 20001, 65534).code(), StatusCode::kPermissionDenied) << "root listens too";
  EXPECT_EQ(CheckPortListener(dir, 20002, 1000).code(), StatusCode::kUnavailable);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry
