// Jobs' named ports through the server against the real standalone server and a remote
// agent: a job's HTTP and WebSocket app reached at PORTS_URL/jobs/ID/ports/web/ with a
// bearer token or a browser's ticket and cookie, the request as the app gets it (no Gantry
// credentials, the forwarding headers, its own cookies), the answer as the client gets it,
// and the address in `gantry job`.
#include <gtest/gtest.h>

#include "port_util.h"
#include "server_fixture.h"

namespace gantry::testing {

namespace {

class JobPorts : public ServerTest {};

TEST_F(JobPorts, AJobsAppAnswersThroughTheServerWithoutGantrysCredentials) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  ASSERT_FALSE(job.proxy_url.empty());
  EXPECT_EQ(job.proxy_url.find(server_->address()), std::string::npos) << "another origin than the dashboard's";
  RawAnswer a = ProxyGet(
      job.ports_url, job.path + "data?x=1&y=%20z",
      std::string("Authorization: Bearer ") + kAliceToken +
          "\r\nCookie: gantry_port=forged; app=2\r\nX-Forwarded-For: 6.6.6.6\r\nX-Gantry-Port-Token: mine\r\n");
  ASSERT_EQ(a.status, 200) << a.head << a.body;
  nlohmann::json seen = nlohmann::json::parse(a.body);
  EXPECT_EQ(seen["path"], job.path + "data?x=1&y=%20z") << "the path as sent, prefix kept";
  EXPECT_EQ(seen["prefix"], "/jobs/" + job.id + "/ports/web") << "the job knows its base URL";
  const nlohmann::json& h = seen["headers"];
  EXPECT_EQ(h.value("Cookie", ""), "app=2") << "the job's own cookies only";
  EXPECT_EQ(h.value("X-Forwarded-For", ""), "127.0.0.1") << "not the client's claim";
  EXPECT_EQ(h.value("X-Forwarded-Prefix", ""), "/jobs/" + job.id + "/ports/web");
  EXPECT_EQ(h.value("Connection", ""), "close");
  // The run's token, which only the job and the proxy's node know: the app can tell the
  // proxy's requests from other processes' on the node.
  const std::string token = seen["token"];
  EXPECT_EQ(token.size(), 40u) << seen.dump();
  EXPECT_EQ(h.value("Authorization", ""), "token " + token);
  EXPECT_EQ(h.value("X-Gantry-Port-Token", ""), token) << "not the client's";
  // The answer: the job's cookie in Gantry's name is dropped, its own kept; one request a
  // connection.
  EXPECT_FALSE(a.HasHeader("Set-Cookie: gantry_port=from-the-job; Path=/")) << a.head;
  EXPECT_TRUE(a.HasHeader("Set-Cookie: app=1; Path=" + job.path)) << "kept to its port's path: " << a.head;
  EXPECT_TRUE(a.HasHeader("Connection: close")) << a.head;
  // A body goes through whole.
  std::string body(200000, 'b');
  RawAnswer post =
      RawHttp(job.ports_url, "POST " + job.path + "upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kAliceToken +
                                 "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_EQ(post.status, 200) << post.head;
  EXPECT_EQ(nlohmann::json::parse(post.body)["body"].get<std::string>().size(), body.size());
  // gantry job gives the address.
  std::string shown = Cli("job " + job.id);
  EXPECT_NE(shown.find("port       web " + job.proxy_url + " (through the server"), std::string::npos) << shown;
}

TEST_F(JobPorts, AWebSocketGoesBothWays) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  auto address = SplitServerAddress(job.ports_url);
  ASSERT_TRUE(address);
  auto fd = ConnectTcp(*address, {});
  ASSERT_TRUE(fd);
  FdStream s(*fd);
  ASSERT_TRUE(s.WriteAll("GET " + job.path + "ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                             "Authorization: Bearer " + kAliceToken + "\r\n\r\n",
                         5000));
  std::string head, rest;
  ASSERT_TRUE(ReadHttpHead(s, 65536, 10000, &head, &rest));
  EXPECT_EQ(head.rfind("HTTP/1.0 101", 0) == 0 || head.rfind("HTTP/1.1 101", 0) == 0, true) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos) << head;
  s.Unread(rest);
  for (const char* word : {"hi", "again"}) {
    ASSERT_TRUE(s.WriteAll(WebSocketFrame(word), 5000));
    std::string got;
    std::string want = std::string("echo:") + word;
    char buf[256];
    for (int i = 0; i < 50 && got.size() < want.size() + 2; ++i) {
      if (!WaitReadable(s, 200)) continue;
      ssize_t n = s.ReadSome(buf, sizeof(buf));
      if (n > 0) got.append(buf, static_cast<size_t>(n));
    }
    ASSERT_GE(got.size(), 2u);
    EXPECT_EQ(got.substr(2), want);
  }
}

TEST_F(JobPorts, ABrowserComesInWithAOneMinuteTicketAndKeepsACookieForThatPortOnly) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  // No credentials: a browser is sent to the job's page on the dashboard; a script gets 401.
  RawAnswer bounced = ProxyGet(job.ports_url, job.path, "Accept: text/html\r\n");
  EXPECT_EQ(bounced.status, 303);
  EXPECT_TRUE(bounced.HasHeader("Location: " + server_->address() + "/#/jobs/" + job.id + "?port=web")) << bounced.head;
  EXPECT_EQ(ProxyGet(job.ports_url, job.path).status, 401);
  // The dashboard's ticket.
  auto alice = server_->Client(kAliceToken);
  nlohmann::json ticket = Json(alice.Post("/v1/jobs/" + job.id + "/ports/web/ticket", "", "application/json"));
  ASSERT_TRUE(ticket.contains("url")) << ticket.dump();
  EXPECT_EQ(ticket["expires_in"], 60);
  std::string url = ticket["url"];
  ASSERT_EQ(url.rfind(job.proxy_url + "?gantry_ticket=", 0), 0u) << url;
  RawAnswer redeemed = ProxyGet(job.ports_url, url.substr(job.ports_url.size()) + "&lab=1", "Accept: text/html\r\n");
  ASSERT_EQ(redeemed.status, 303) << redeemed.head << redeemed.body;
  EXPECT_TRUE(redeemed.HasHeader("Location: " + job.path + "?lab=1")) << redeemed.head;
  size_t at = redeemed.head.find("Set-Cookie: gantry_port=");
  ASSERT_NE(at, std::string::npos) << redeemed.head;
  std::string set_cookie = redeemed.head.substr(at, redeemed.head.find("\r\n", at) - at);
  EXPECT_NE(set_cookie.find("; Path=" + job.path + ";"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos) << set_cookie;
  std::string cookie = set_cookie.substr(12, set_cookie.find(';') - 12);
  // The cookie opens the port; the app never sees it.
  RawAnswer in = ProxyGet(job.ports_url, job.path + "data", "Cookie: " + cookie + "; app=3\r\n");
  ASSERT_EQ(in.status, 200) << in.head << in.body;
  EXPECT_EQ(nlohmann::json::parse(in.body)["headers"].value("Cookie", ""), "app=3");
  // A ticket opens once.
  EXPECT_EQ(ProxyGet(job.ports_url, url.substr(job.ports_url.size()), "Accept: text/html\r\n").status, 401);
  // The audit has the ticket, not each request.
  std::string audit = Cli("audit --limit 20", kRootToken);
  EXPECT_NE(audit.find("port ticket"), std::string::npos) << audit;
}

// The same through a remote agent, which connects back to the server for each connection.
class RemotePortProxy : public RemoteAgentTest {};

TEST_F(RemotePortProxy, RequestsReachTheJobThroughTheAgentsConnectionBack) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  ASSERT_FALSE(job.proxy_url.empty());
  RawAnswer a =
      ProxyGet(job.ports_url, job.path + "remote", std::string("Authorization: Bearer ") + kAliceToken + "\r\n");
  ASSERT_EQ(a.status, 200) << a.head << a.body;
  EXPECT_EQ(nlohmann::json::parse(a.body)["path"], job.path + "remote");
}

}  // namespace
}  // namespace gantry::testing
