// The HTTP front end against clients that frame requests to hurt: bodies sent a byte at a
// time hold no worker (and agents' calls have workers of their own), two Content-Length
// headers are refused instead of smuggling a second request, and TLS 1.2 offers AEAD suites
// only.
#include "server/http_framing.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "security/security_util.h"

namespace gantry::testing {
namespace {

// Milliseconds `f` took.
template <typename F>
int64_t MsOf(F f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

// Before: 20 connections each sending a `Content-Length: 1000` body one byte every few
// seconds held every worker (bodies were read on them): /healthz did not answer within 1 s
// for 30 s, and with --node-timeout 8 a remote node was declared lost and its job requeued.
TEST(HttpFraming, SlowBodiesHoldNoWorkerAndAgentsAreNeverBehindUsers) {
  RaiseFileLimit();
  std::string dir = TempPath("slow-bodies");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  server.AddArgs({"--http-workers", "4", "--request-timeout", "6", "--node-timeout", "3"});
  server.Start();
  auto agent = server.Client(kAgentToken);
  nlohmann::json reg = {
      {"node_id", "node-a"},
      {"inventory",
       {{"gpus", {{{"index", 0}, {"uuid", "GPU-a-0"}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}}}}}}};
  ASSERT_EQ(agent.Post("/v1/agent/register", reg.dump(), "application/json")->status, 200);

  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  // A user's slow body; a body off /v1/ and without a token; a chunked body whose first chunk
  // is over the limit; a user's slow body to an agent's path.
  const std::string heads[] = {fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                                           "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
                                           kAliceToken),
                               "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{",
                               fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                                           "Transfer-Encoding: chunked\r\n\r\n100001\r\n{{",
                                           kAliceToken),
                               fmt::format("POST /v1/agent/report HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                                           "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
                                           kAliceToken)};
  for (int i = 0; i < 24; ++i) {
    slow.emplace_back([&, i] {
      int fd = Connect(server.address(), "127.0.0.4");
      SendAll(fd, heads[i % 4]);
      for (int k = 0; k < 40 && !stop; ++k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200 + 10 * i));
        if (k % 10 == 9 && !SendAll(fd, " ")) break;  // a byte every ~2 s
      }
      close(fd);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // For 8 s (past the request deadline): health, a user's call and the agent's heartbeat
  // each answer within a second.
  auto anyone = server.Client(nullptr);
  auto alice = server.Client(kAliceToken);
  int64_t worst = 0;
  for (int round = 0; round < 16; ++round) {
    // No answer at all (a read timeout) counts as the slowest.
    auto ok = [](const httplib::Result& r) { return r && r->status == 200; };
    worst = std::max(worst, MsOf([&] { EXPECT_TRUE(ok(anyone.Get("/healthz"))); }));
    worst = std::max(worst, MsOf([&] { EXPECT_TRUE(ok(alice.Get("/v1/queue"))); }));
    worst = std::max(
        worst, MsOf([&] {
          EXPECT_TRUE(ok(agent.Post("/v1/agent/report", R"({"node_id": "node-a", "events": []})", "application/json")));
        }));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  stop = true;
  for (auto& t : slow) t.join();
  EXPECT_LT(worst, 1000);
  // The node stayed up through it (its reports kept coming).
  nlohmann::json nodes = Json(server.Client(kRootToken).Get("/v1/nodes"));
  EXPECT_EQ(nodes["nodes"][0].value("state", ""), "up") << nodes.dump();
  // No slow body became a job: each ran out of time before its 1000 bytes came.
  EXPECT_EQ(Json(alice.Get("/v1/jobs"))["jobs"].size(), 0u);
}

// Before: two Content-Length headers were taken, and the rest of the body was answered as
// a second request (request smuggling behind a proxy that reads the other length).
TEST(HttpFraming, TwoContentLengthsAreRefused) {
  std::string dir = TempPath("two-lengths");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "1x1xT4");
  server.Start();
  // A valid job under the first length; a proxy reading the second would take the rest as
  // body, the server read it as a second request.
  const std::string job = R"({"gpus": 1, "command": "true"})";
  for (const std::string& lengths : {fmt::format("Content-Length: {}\r\nContent-Length: 200", job.size()),
                                     fmt::format("Content-Length: {0}\r\ncontent-length: {0}", job.size())}) {
    int fd = Connect(server.address());
    SendAll(fd, fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n"
                            "Content-Type: application/json\r\n{}\r\n\r\n{}"
                            "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n\r\n",
                            kAliceToken, lengths, job, kAliceToken));
    std::string answer = ReadAnswer(fd, 3);
    std::string more = ReadAnswer(fd, 1);  // until the server closes, or a second answer
    close(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
    EXPECT_EQ(more, "") << "a second answer: " << more;
  }
  EXPECT_EQ(Json(server.Client(kAliceToken).Get("/v1/jobs"))["jobs"].size(), 0u);  // nothing was accepted
}

// Before: TLS 1.2 offered AES-CBC with SHA-1 MACs.
TEST(HttpFraming, TlsOffersOnlyAeadSuites) {
  std::string dir = TempPath("tls-suites");
  std::string out;
  ASSERT_EQ(MakeTestCertificates(dir, &out), 0) << out;
  ServerProcess server(dir + "/srv", "");
  server.AddArgs({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"});
  server.Start();
  auto [host, port] = HostPort(server.address());
  auto handshake = [&, host = host, port = port](const std::string& options) {
    std::string o;
    return RunCommand(fmt::format("openssl s_client -connect {}:{} {} </dev/null 2>&1", host, port, options), &o);
  };
  for (const char* cbc : {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA256"}) {
    EXPECT_NE(handshake(std::string("-tls1_2 -cipher ") + cbc), 0) << cbc;
  }
  EXPECT_EQ(handshake("-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256"), 0);
  EXPECT_EQ(handshake("-tls1_2 -cipher ECDHE-ECDSA-CHACHA20-POLY1305"), 0);
  EXPECT_EQ(handshake("-tls1_3"), 0);
  // A list naming no suite is refused at start, naming the flag.
  out.clear();
  int rc = RunCommand(fmt::format("{0} server --config {1}/srv/config --data-dir {1}/bad --listen 127.0.0.1:0 "
                                  "--tls-cert {1}/server.pem --tls-key {1}/server.key --tls-ciphers NO-SUCH 2>&1",
                                  GANTRY_BINARY, dir),
                      &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("tls-ciphers"), std::string::npos) << out;
}

// Before: what parked connections buffer was bounded in all only, so one address's slow
// bodies, filled to just under the bound, got any other client's body that came in pieces
// closed. Now past the bound only an address over its fair share loses connections.
TEST(HttpFraming, OneAddressCannotCrowdOutAnothersBody) {
  RaiseFileLimit();
  std::string dir = TempPath("byte-shares");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "1x1xT4");
  server.Start();
  const int64_t kBudget = 64LL << 20;  // 64 bodies of 1 MiB
  const std::string auth = fmt::format("Authorization: Bearer {}\r\n", kAliceToken);
  // 64 bodies from 127.0.0.7, each 20 bytes short of whole: the bound less 1,280 bytes.
  std::vector<int> hog;
  for (int i = 0; i < 64; ++i) {
    std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n" + auth +
                       "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n";
    int fd = Connect(server.address(), "127.0.0.7");
    ASSERT_TRUE(SendAll(fd, head + std::string(static_cast<size_t>(kBudget / 64) - head.size() - 20, ' ')));
    hog.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // all of it read and parked
  // A job from 127.0.0.8 whose 20 KB body comes in three parts, the second past the bound.
  std::string job = R"({"gpus": 1, "command": "true")" + std::string(20000, ' ') + "}";
  int fd = Connect(server.address(), "127.0.0.8");
  ASSERT_TRUE(SendAll(fd, fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: t\r\n{}Content-Type: application/json\r\n"
                                      "Content-Length: {}\r\n\r\n{}",
                                      auth, job.size(), job.substr(0, 10))));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(SendAll(fd, job.substr(10, 10000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  SendAll(fd, job.substr(10010));
  std::string answer = ReadAnswer(fd, 5);
  close(fd);
  for (int h : hog) close(h);
  EXPECT_EQ(answer.rfind("HTTP/1.1 201", 0), 0u) << "answer: " << answer;
}

// The event loop's framing judgement alone: a request goes to a worker when it is whole, or
// at once when it will be refused unread, never while a body it would read is still coming.
TEST(HttpFraming, TheEventLoopHandsOverWholeRequestsOrSureRefusals) {
  auto ready = [](const std::string& bytes, const BodyGate& gate = nullptr) {
    return AssessRequest(bytes, 100, gate).ready;
  };
  const std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n";
  EXPECT_FALSE(ready(head));                                   // the head is not whole
  EXPECT_TRUE(ready(head + "\r\n"));                           // no body
  EXPECT_FALSE(ready(head + "Content-Length: 5\r\n\r\nabc"));  // 2 bytes to come
  EXPECT_TRUE(ready(head + "Content-Length: 5\r\n\r\nabcde"));
  EXPECT_TRUE(ready(head + "Content-Length: 500\r\n\r\n"));                     // over the limit: 413 at once
  EXPECT_TRUE(ready(head + "Content-Length: 5\r\nContent-Length: 9\r\n\r\n"));  // two lengths: 400
  EXPECT_TRUE(ready(head + "Content-Length: 5x\r\n\r\n"));                      // malformed: 400
  EXPECT_TRUE(ready(head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunked = head + "Transfer-Encoding: chunked\r\n\r\n";
  EXPECT_FALSE(ready(chunked + "3\r\nabc\r\n"));  // no last chunk yet
  EXPECT_TRUE(ready(chunked + "3\r\nabc\r\n0\r\n\r\n"));
  EXPECT_TRUE(ready(chunked + "zz\r\n"));  // malformed chunk size
  RequestFraming over = AssessRequest(chunked + "50\r\n" + std::string(80, 'x') + "\r\n40\r\n", 100, nullptr);
  EXPECT_TRUE(over.ready);
  EXPECT_TRUE(over.chunks_over_limit);  // 0x50 + 0x40 > 100, announced before it arrived
  // A body the gate would not read is not waited for; one it would read is.
  auto no = [](std::string_view, std::string_view) { return false; };
  auto yes = [](std::string_view path, std::string_view auth) { return path == "/v1/jobs" && auth == "Bearer ok"; };
  EXPECT_TRUE(ready(head + "Content-Length: 5\r\n\r\n", no));
  EXPECT_FALSE(ready(head + "Authorization: Bearer ok\r\nContent-Length: 5\r\n\r\n", yes));
}

}  // namespace
}  // namespace gantry::testing
