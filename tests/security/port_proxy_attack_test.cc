// The port proxy attacked: another team, a teammate, a node agent's token or no token at
// all reach a job's port; a cookie or ticket for one port used on another, forged or
// replayed; addresses that try to step out of the job's port or into a header; a job that
// answers garbage or sets Gantry's cookies; a neighbour that bound the job's port first.
// Each is refused, the field or reason named, and the proxy goes on.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "server/port_util.h"
#include "server/server_fixture.h"

namespace gantry::testing {
namespace {

class PortProxyAttacks : public ServerTest {
 protected:
  static std::string Bearer(const char* token) { return std::string("Authorization: Bearer ") + token + "\r\n"; }
  // The dashboard's ticket for job `id`'s port `web`, as `token`'s holder: its path and query.
  std::string TicketPath(const PortJob& job, const char* token = kAliceToken) {
    nlohmann::json t =
        Json(server_->Client(token).Post("/v1/jobs/" + job.id + "/ports/web/ticket", "", "application/json"));
    std::string url = t.value("url", "");
    return url.empty() ? "" : url.substr(job.ports_url.size());
  }
  // The cookie a redeemed ticket sets ("gantry_port=...").
  std::string CookieFor(const PortJob& job, const char* token = kAliceToken) {
    RawAnswer r = ProxyGet(job.ports_url, TicketPath(job, token), "Accept: text/html\r\n");
    size_t at = r.head.find("Set-Cookie: ");
    if (at == std::string::npos) return "";
    at += 12;
    return r.head.substr(at, r.head.find(';', at) - at);
  }
};

TEST_F(PortProxyAttacks, NoOneButTheOwnerTheTeamsAdminsOrAnAdminReachesAJobsPort) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  ASSERT_FALSE(job.proxy_url.empty());
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer(kAliceToken)).status, 200);
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer(kLeadToken)).status, 200) << "the team's admin";
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer(kRootToken)).status, 200) << "an admin";
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer(kBobToken)).status, 404) << "another team does not see it";
  RawAnswer mate = ProxyGet(job.ports_url, job.path, Bearer(kCarolToken));
  EXPECT_EQ(mate.status, 403) << "a teammate: another person's account";
  EXPECT_NE(mate.body.find("only its owner, its team's admins or an admin"), std::string::npos) << mate.body;
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer(AgentToken("node-a").c_str())).status, 401)
      << "a node agent's token is no person's";
  EXPECT_EQ(ProxyGet(job.ports_url, job.path, Bearer("not-a-token")).status, 401);
  // Tickets are refused as sessions are.
  auto bob = server_->Client(kBobToken);
  EXPECT_EQ(bob.Post("/v1/jobs/" + job.id + "/ports/web/ticket", "", "application/json")->status, 404);
  auto carol = server_->Client(kCarolToken);
  EXPECT_EQ(carol.Post("/v1/jobs/" + job.id + "/ports/web/ticket", "", "application/json")->status, 403);
  auto agent = server_->Client(AgentToken("node-a").c_str());
  EXPECT_EQ(agent.Post("/v1/jobs/" + job.id + "/ports/web/ticket", "", "application/json")->status, 403);
  auto alice = server_->Client(kAliceToken);
  auto other = alice.Post("/v1/jobs/" + job.id + "/ports/admin/ticket", "", "application/json");
  EXPECT_EQ(other->status, 400);
  EXPECT_NE(other->body.find("has no port named 'admin' (it has: web)"), std::string::npos) << other->body;
  EXPECT_NE(other->body.find(R"("field":"port")"), std::string::npos) << other->body;
}

TEST_F(PortProxyAttacks, ACookieOrTicketOpensItsOwnPortOnceAndNoOther) {
  PortJob mine = StartPortApp(*server_, kAliceToken);
  PortJob theirs = StartPortApp(*server_, kRootToken);  // an admin's job: alice cannot see it
  ASSERT_FALSE(mine.proxy_url.empty());
  ASSERT_FALSE(theirs.proxy_url.empty());
  std::string cookie = CookieFor(mine);
  ASSERT_EQ(cookie.rfind("gantry_port=", 0), 0u) << cookie;
  EXPECT_EQ(ProxyGet(mine.ports_url, mine.path, "Cookie: " + cookie + "\r\n").status, 200);
  // The same cookie sent to another job's port (a hostile page's fetch would send it if the
  // browser did): refused, whoever holds it.
  EXPECT_EQ(ProxyGet(theirs.ports_url, theirs.path, "Cookie: " + cookie + "\r\n").status, 401);
  // An admin's cookie for the admin's own job does not open alice's either.
  std::string admins = CookieFor(theirs, kRootToken);
  ASSERT_FALSE(admins.empty());
  EXPECT_EQ(ProxyGet(mine.ports_url, theirs.path, "Cookie: " + admins + "\r\n").status, 200);
  EXPECT_EQ(ProxyGet(mine.ports_url, mine.path, "Cookie: " + admins + "\r\n").status, 401);
  // Altered or made-up cookies open nothing; a forged one beside the real one is ignored.
  std::string altered = cookie;
  altered[20] = altered[20] == 'A' ? 'B' : 'A';
  EXPECT_EQ(ProxyGet(mine.ports_url, mine.path, "Cookie: " + altered + "\r\n").status, 401);
  EXPECT_EQ(ProxyGet(mine.ports_url, mine.path, "Cookie: gantry_port=x; " + cookie + "\r\n").status, 200);
  // A ticket: once, for its own port, unaltered.
  std::string ticket = TicketPath(mine);
  std::string moved = ticket;
  moved.replace(0, mine.path.size(), theirs.path);
  EXPECT_EQ(ProxyGet(mine.ports_url, moved, "Accept: text/html\r\n").status, 401) << "a ticket for another port";
  EXPECT_EQ(ProxyGet(mine.ports_url, ticket, "Accept: text/html\r\n").status, 303);
  RawAnswer replay = ProxyGet(mine.ports_url, ticket, "Accept: text/html\r\n");
  EXPECT_EQ(replay.status, 401);
  EXPECT_NE(replay.body.find("expired or was used already"), std::string::npos) << replay.body;
  // A job cannot set Gantry's cookie in the browser: its Set-Cookie of that name is dropped.
  RawAnswer a = ProxyGet(mine.ports_url, mine.path + "x", Bearer(kAliceToken));
  EXPECT_EQ(a.head.find("gantry_port"), std::string::npos) << a.head;
}

TEST_F(PortProxyAttacks, AddressesDoNotStepOutOfTheJobsPortOrIntoAHeader) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  ASSERT_FALSE(job.proxy_url.empty());
  // Dot segments are the job's app's business: they still go to this job's port only.
  RawAnswer dots = ProxyGet(job.ports_url, job.path + "%2e%2e/%2e%2e/%2e%2e/1/ports/web/", Bearer(kAliceToken));
  ASSERT_EQ(dots.status, 200) << dots.head;
  EXPECT_EQ(nlohmann::json::parse(dots.body)["prefix"], "/jobs/" + job.id + "/ports/web");
  // A job id or port name that is not a plain word names no port, and never reaches a header.
  for (std::string path :
       {"/jobs/" + job.id + "%0d%0aSet-Cookie:%20x=1/ports/web/", "/jobs/" + job.id + "/ports/w%22eb/",
        std::string("/jobs/../ports/web/"), "/jobs/" + job.id + "/ports/" + std::string(80, 'a') + "/"}) {
    RawAnswer r = ProxyGet(job.ports_url, path, Bearer(kAliceToken));
    EXPECT_EQ(r.status, 404) << path << "\n" << r.head;
    EXPECT_EQ(r.head.find("x=1"), std::string::npos) << r.head;
  }
  // The master port (the job's own rendezvous) and other names are not served.
  RawAnswer master = ProxyGet(job.ports_url, "/jobs/" + job.id + "/ports/master/", Bearer(kAliceToken));
  EXPECT_EQ(master.status, 400) << master.body;
  // The API server's own paths are not on the proxy, and the proxy's not on the API.
  EXPECT_EQ(ProxyGet(job.ports_url, "/v1/jobs", Bearer(kAliceToken)).status, 404);
  EXPECT_EQ(ProxyGet(server_->address(), job.path, Bearer(kAliceToken)).status, 404);
}

TEST_F(PortProxyAttacks, AJobsGarbageAnswerIsABadGatewayAndTheProxyGoesOn) {
  PortJob job = StartPortApp(*server_, kAliceToken);
  ASSERT_FALSE(job.proxy_url.empty());
  RawAnswer bad = ProxyGet(job.ports_url, job.path + "garbage", Bearer(kAliceToken));
  EXPECT_EQ(bad.status, 502) << bad.head << bad.body;
  EXPECT_NE(bad.body.find("not HTTP/1.1"), std::string::npos) << bad.body;
  EXPECT_EQ(ProxyGet(job.ports_url, job.path + "after", Bearer(kAliceToken)).status, 200);
}

TEST_F(PortProxyAttacks, ANeighbourThatBoundTheJobsPortIsNotServed) {
  // A job whose app has not started listening: someone else (here the test, as root: not the
  // job's account) binds its port first, hoping to serve the job's users its own pages.
  auto alice = server_->Client(kAliceToken);
  std::string id =
      Json(alice.Post("/v1/jobs", R"({"gpus": 1, "ports": ["web"], "command": "sleep 300"})", "application/json"))
          .value("id", "");
  ASSERT_EQ(WaitFor(id, "running"), "running");
  nlohmann::json j = Json(alice.Get("/v1/jobs/" + id));
  int port = 0;
  std::string proxy_url;
  for (const auto& p : j["ports"]) {
    if (p["name"] == "web") {
      port = p["port"];
      proxy_url = p["proxy_url"];
    }
  }
  ASSERT_GT(port, 0);
  std::string path = "/jobs/" + id + "/ports/web/";
  std::string ports_url = proxy_url.substr(0, proxy_url.size() - path.size());
  RawAnswer nobody = ProxyGet(ports_url, path, Bearer(kAliceToken));
  EXPECT_EQ(nobody.status, 502) << nobody.body;
  EXPECT_NE(nobody.body.find("nothing listens on port"), std::string::npos) << nobody.body;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  RawAnswer squatted = ProxyGet(ports_url, path, Bearer(kAliceToken));
  close(fd);
  EXPECT_EQ(squatted.status, 403) << squatted.body;
  EXPECT_NE(squatted.body.find("not by the job's account"), std::string::npos) << squatted.body;
}

}  // namespace
}  // namespace gantry::testing
