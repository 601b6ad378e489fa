// The HTTP front end against bad clients: idle sockets and long polls hold no thread,
// bodies are limited (any encoding) before authentication, slow and idle clients are cut
// off, connections are capped per address, bodiless POSTs and form bodies work, a load of
// submits all get answers, and TLS serves the API to clients that trust its CA.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "command_util.h"
#include "security/security_util.h"

namespace gantry::testing {
namespace {

class FrontEnd : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> args, const std::string& gpus = "1x2xT4") {
    RaiseFileLimit();
    std::string dir = TempPath("srv");
    std::filesystem::remove_all(dir);
    server_ = std::make_unique<ServerProcess>(dir, gpus);
    server_->AddArgs(args);
    server_->Start();
  }
  std::string Request(const std::string& raw, double seconds = 5) {
    int fd = Connect(server_->address());
    EXPECT_GE(fd, 0);
    SendAll(fd, raw);
    std::string answer = ReadAnswer(fd, seconds);
    close(fd);
    return answer;
  }
  std::unique_ptr<ServerProcess> server_;
};

// Before: 40 silent connections made /healthz time out, and 34 long-polling agents
// stalled users' calls.
TEST_F(FrontEnd, AThousandIdleConnectionsAndFiveHundredLongPollsStallNobody) {
  StartServer({}, "");  // a cluster server: agents long-poll it
  auto agent = server_->Client(kAgentToken);
  nlohmann::json reg = {
      {"node_id", "node-a"},
      {"inventory",
       {{"gpus", {{{"index", 0}, {"uuid", "GPU-a-0"}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}}}}}}};
  std::string session = Json(agent.Post("/v1/agent/register", reg.dump(), "application/json"))["session"];
  ASSERT_FALSE(session.empty());
  std::vector<int> idle, polls;
  for (int i = 0; i < 1000; ++i) idle.push_back(Connect(server_->address(), "127.0.0.2"));
  std::string poll = fmt::format(
      "GET /v1/agent/orders?node=node-a&session={}&ack=0&wait=20 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
      "{}\r\n\r\n",
      session, kAgentToken);
  for (int i = 0; i < 500; ++i) {
    polls.push_back(Connect(server_->address(), "127.0.0.3"));
    SendAll(polls.back(), poll);
  }
  EXPECT_EQ(std::count(idle.begin(), idle.end(), -1) + std::count(polls.begin(), polls.end(), -1), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto health = server_->Client(nullptr);
  health.set_read_timeout(5);
  auto h = health.Get("/healthz");
  ASSERT_TRUE(h) << "healthz did not answer while 1,500 connections were held";
  EXPECT_EQ(h->status, 200);
  auto queue = server_->Client(kAliceToken).Get("/v1/queue");
  ASSERT_TRUE(queue);
  EXPECT_EQ(queue->status, 200);
  // An order wakes every waiting poll with it.
  auto job = server_->Client(kAliceToken).Post("/v1/jobs", R"({"gpus": 1, "command": "true"})", "application/json");
  ASSERT_EQ(job->status, 201);
  int woken = 0;
  for (int fd : polls) woken += ReadAnswer(fd, 5).find("\"type\":\"start\"") != std::string::npos;
  EXPECT_EQ(woken, 500);
  for (int fd : idle) close(fd);
  for (int fd : polls) close(fd);
}

// Before: an unauthenticated 100 MiB chunked POST was buffered, and an authenticated 10 MB
// chunked body was parsed.
TEST_F(FrontEnd, ChunkedBodiesMeetTheLimitBeforeAuthentication) {
  StartServer({});
  std::string head =
      "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n";
  int fd = Connect(server_->address());
  SendAll(fd, head + "\r\n");  // no token, and not a body byte sent yet
  std::string answer = ReadAnswer(fd, 5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer;
  EXPECT_TRUE(ClosedByServer(fd, 5));
  close(fd);

  fd = Connect(server_->address());
  std::atomic<bool> done{false};
  std::thread sender([&] {
    SendAll(fd, head + "Authorization: Bearer " + kAliceToken + "\r\n\r\n");
    std::string chunk = fmt::format("{:x}\r\n{}\r\n", 256 * 1024, std::string(256 * 1024, ' '));
    for (int i = 0; i < 40 && !done; ++i) {  // 10 MiB
      if (!SendAll(fd, chunk)) break;
    }
  });
  answer = ReadAnswer(fd, 10);
  done = true;
  shutdown(fd, SHUT_RDWR);
  sender.join();
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("\"field\":\"body\""), std::string::npos);
  // A declared length over the limit is refused before a byte of it is read.
  answer =
      Request(fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                          "Content-Length: 10485760\r\n\r\n",
                          kAliceToken));
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  // Both framings at once (a smuggling attempt) is refused.
  answer =
      Request(fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                          "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                          kAliceToken));
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  EXPECT_NE(answer.find("Transfer-Encoding"), std::string::npos) << answer;
  // The 413s are audited.
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=20"));
  int too_large = 0;
  for (const auto& e : audit["audit"]) too_large += e.value("status", 0) == 413;
  EXPECT_EQ(too_large, 2) << audit.dump();
}

// Before: a POST with no body got "HTTP 400" with no field and no audit; a form body over
// 8 KiB got 413.
TEST_F(FrontEnd, APostWithoutABodyAndAFormBodyAreServed) {
  StartServer({});
  std::string answer = Request(
      fmt::format("POST /v1/nodes/t4-0/drain HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n\r\n", kRootToken));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  std::string form(10 * 1024, 'a');
  answer =
      Request(fmt::format("POST /v1/nodes/t4-0/undrain HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                          "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{}",
                          kRootToken, form.size(), form));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer.substr(0, 300);
  nlohmann::json audit = Json(server_->Client(kRootToken).Get("/v1/audit?limit=5"));
  EXPECT_NE(audit.dump().find("drain"), std::string::npos) << audit.dump();
}

TEST_F(FrontEnd, SlowAndIdleClientsAreCutOff) {
  StartServer({"--request-timeout", "1", "--idle-timeout", "2"});
  int slow = Connect(server_->address());
  SendAll(slow, "GET /healthz HTTP/1.1\r\nHo");  // and then nothing
  EXPECT_TRUE(ClosedByServer(slow, 5));
  close(slow);
  int idle = Connect(server_->address());
  EXPECT_TRUE(ClosedByServer(idle, 6));
  close(idle);
  // A client that keeps talking is served.
  auto c = server_->Client(nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.Get("/healthz")->status, 200);
}

// A client that sends its request a byte at a time (slowloris) holds a parked connection,
// never a worker: with 2 workers and 20 such clients, /healthz still answers at once.
TEST_F(FrontEnd, HalfSentRequestsHoldNoWorker) {
  StartServer({"--http-workers", "2"});
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(Connect(server_->address()));
    SendAll(slow.back(), "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Ty");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c = server_->Client(nullptr);
  c.set_read_timeout(3);
  for (int i = 0; i < 5; ++i) {
    auto r = c.Get("/healthz");
    ASSERT_TRUE(r) << "a worker was held by a half-sent request";
    EXPECT_EQ(r->status, 200);
  }
  for (int fd : slow) close(fd);
}

TEST_F(FrontEnd, ConnectionsAreCappedPerClientAddress) {
  StartServer({"--max-connections-per-client", "20"});
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(Connect(server_->address(), "127.0.0.4"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int extra = Connect(server_->address(), "127.0.0.4");
  std::string answer = ReadAnswer(extra, 5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("too many connections from 127.0.0.4 (limit 20)"), std::string::npos) << answer;
  close(extra);
  // Another address is not affected.
  int other = Connect(server_->address(), "127.0.0.5");
  SendAll(other, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(ReadAnswer(other, 5).rfind("HTTP/1.1 200", 0), 0u);
  close(other);
  for (int fd : held) close(fd);
}

// Before: 2 of 3,561 submits under load got a connection reset and no answer.
TEST_F(FrontEnd, EverySubmitUnderLoadGetsAnAnswer) {
  StartServer({}, "4x8xA100-80GB");
  std::atomic<int> answered{0}, created{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      auto c = server_->Client(kAliceToken);
      for (int i = 0; i < 150; ++i) {
        auto r = c.Post("/v1/jobs", R"({"gpus": 1, "estimated_duration": 1h, "hold_gpus": "1h"})", "application/json");
        answered += r ? 1 : 0;
        created += r && r->status == 201;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered.load(), 1200);
  EXPECT_EQ(created.load(), 1200);
}

// TLS on the listener; the CLI and agents trust the server through a CA file.
TEST_F(FrontEnd, TlsServesTheApiToClientsThatTrustItsCa) {
  std::string dir = TempPath("tls");
  std::string out;
  ASSERT_EQ(MakeTestCertificates(dir, &out), 0) << out;
  StartServer({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"}, "");
  ASSERT_EQ(server_->address().rfind("https://", 0), 0u) << server_->address();
  std::string cli =
      fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} queue 2>&1", server_->address(), kAliceToken, GANTRY_BINARY);
  out.clear();
  EXPECT_EQ(RunCommand("GANTRY_CA_CERT=" + dir + "/ca.pem " + cli, &out), 0) << out;
  out.clear();
  EXPECT_NE(RunCommand(cli, &out), 0) << "a server the client cannot verify must be refused: " << out;
  // Plain HTTP to the TLS port gets no answer.
  std::string http = server_->address();
  http.replace(0, 5, "http");
  int fd = Connect(http);
  SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(ReadAnswer(fd, 3).find("HTTP/1.1 200"), std::string::npos);
  close(fd);
  // A remote agent over https registers and runs a job.
  AgentProcess agent(server_->dir(), "node-a", "2xT4", {"--ca-cert", dir + "/ca.pem"});
  agent.Start(server_->address());
  httplib::Client alice(server_->address());
  alice.set_ca_cert_path((dir + "/ca.pem").c_str());
  alice.set_bearer_token_auth(kAliceToken);
  std::string id;
  for (int i = 0; i < 500 && id.empty(); ++i) {
    auto r = alice.Post("/v1/jobs", R"({"gpus": 1, "command": "echo over tls"})", "application/json");
    if (r && r->status == 201) id = Json(r)["id"];
    if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(id.empty()) << "the agent did not register over https";
  EXPECT_EQ(WaitUntil([&] { return JobField(alice, id, "state"); }, "succeeded"), "succeeded");
}

}  // namespace
}  // namespace gantry::testing
