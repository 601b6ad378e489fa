// LeaderFollower against real HTTP servers on loopback, over each transport (the plain one
// the CLI uses, TLS as the agent and gantryd use it for https://): it reads a server list (refusing
// what is not an address), goes to the leader a standby names, moves past a server that
// does not answer, waits out a take-over, and sends a write again after a broken
// connection only when told it is safe.
#include "net/leader_follower.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "hostile_server.h"
#include "net/plain_http_connection.h"
#include "net/tls_http_connection.h"

namespace gantry::testing {
namespace {

using std::chrono::milliseconds;

// Whether the test runs over TLS (else plain HTTP): the transport's parameter.
bool tls_endpoints = false;

// An HTTP server (HTTPS when tls_endpoints) on a loopback port (`port`, or any free one)
// with `workers` threads, stopped when the test ends.
class Endpoint {
 public:
  explicit Endpoint(std::function<void(const httplib::Request&, httplib::Response&)> handler, size_t workers = 8,
                    int port = 0)
      : tls_(tls_endpoints) {
    const std::string& certs = SharedTestCertificates();
    server_ =
        tls_ ? std::make_unique<httplib::SSLServer>((certs + "/server.pem").c_str(), (certs + "/server.key").c_str())
             : std::make_unique<httplib::Server>();
    server_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    server_->Get(".*", [this, handler](const httplib::Request& q, httplib::Response& r) {
      ++hits_;
      handler(q, r);
    });
    server_->Post(".*", [this, handler](const httplib::Request& q, httplib::Response& r) {
      ++hits_;
      handler(q, r);
    });
    port_ = port;
    if (port == 0)
      port_ = server_->bind_to_any_port("127.0.0.1");
    else if (!server_->bind_to_port("127.0.0.1", port))
      ADD_FAILURE() << "port " << port << " is taken";
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  ~Endpoint() {
    server_->stop();
    thread_.join();
  }
  std::string url() const { return (tls_ ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port_); }
  int hits() const { return hits_; }

 private:
  bool tls_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> hits_{0};
};

// A standby's answer, naming `leader` ("" before anyone leads).
void Standby(httplib::Response& r, const std::string& leader) {
  r.status = 503;
  r.set_content(R"({"error": {"code": "unavailable", "message": "not the leader", "leader": ")" + leader + R"("}})",
                "application/json");
}

// An address where nothing listens.
std::string DeadAddress() {
  return (tls_endpoints ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(FreeLoopbackPort());
}

// Each test runs over both transports.
class LeaderFollowerOver : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { tls_endpoints = GetParam() == "tls"; }
  LeaderFollower Follow(std::vector<std::string> urls) {
    HttpConnectionOptions options;
    options.connect_timeout = std::chrono::seconds(2);
    options.read_timeout = std::chrono::seconds(5);
    if (tls_endpoints) {
      options.ca_cert = SharedTestCertificates() + "/ca.pem";
      return LeaderFollower(std::move(urls), [options](const std::string& u) { return ConnectTls(u, options); });
    }
    return LeaderFollower(std::move(urls), [options](const std::string& u) { return ConnectPlainHttp(u, options); });
  }
};

HttpResponse GetJobs(LeaderFollower& f, bool resend = true, milliseconds wait = milliseconds(0)) {
  return f.Send({"GET", "/v1/jobs", {}, "", ""}, resend, wait);
}

TEST(ServerList, ReadsAddressesAndRefusesWhatIsNotOne) {
  auto urls = ParseServerList(" a:8080, https://b.example:8443/ ,a:8080", "--server");
  ASSERT_TRUE(urls.ok()) << urls.status().ToString();
  EXPECT_EQ(*urls, (std::vector<std::string>{"http://a:8080", "https://b.example:8443"}));
  for (const char* bad : {"", "a:1,,b:2", "ftp://a", "a:1;rm -rf /", "http://", "a b:1", "$(id):80"}) {
    auto r = ParseServerList(bad, "--server");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "--server") << bad;
  }
}

TEST(ServerList, AStandbysLeaderIsTakenOnlyAsAnAddressAndNeverFromHttpsToHttp) {
  EXPECT_TRUE(MayFollowLeader("http://b:8080", "http://a:8080"));
  EXPECT_TRUE(MayFollowLeader("https://b:8443", "http://a:8080"));
  EXPECT_TRUE(MayFollowLeader("https://b:8443", "https://a:8443"));
  EXPECT_FALSE(MayFollowLeader("http://b:8080", "https://a:8443")) << "the token would travel in clear";
  for (const char* bad :
       {"", "b:8080", "ftp://b", "http://b:8080,http://c:8080", "http://b c:80", "http://b:99999", "http://b:8080/"}) {
    EXPECT_FALSE(MayFollowLeader(bad, "http://a:8080")) << bad;
  }
}

TEST_P(LeaderFollowerOver, AChainOfMadeUpLeadersEnds) {
  // Each answer names a new leader: the same server under a new path. The server has two
  // workers: a client that kept a connection open to each address it was sent to would
  // hold both and wait for its third answer until its read timeout.
  std::atomic<int> n{0};
  std::string self;
  Endpoint chain([&](const httplib::Request&, httplib::Response& r) { Standby(r, self + "/p" + std::to_string(++n)); },
                 2);
  self = chain.url();
  auto f = Follow({chain.url()});
  auto r = GetJobs(f, true, milliseconds(1500));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.status, 503);
  EXPECT_LE(f.urls().size(), 9u) << "at most eight addresses learnt from standbys";
  EXPECT_LT(chain.hits(), 40);
}

TEST_P(LeaderFollowerOver, GoesToTheLeaderAStandbyNamesAndStaysThere) {
  Endpoint leader([](const httplib::Request&, httplib::Response& r) { r.set_content("leader", "text/plain"); });
  Endpoint standby([&](const httplib::Request&, httplib::Response& r) { Standby(r, leader.url()); });
  auto f = Follow({standby.url()});  // the leader is not even in the list
  for (int i = 0; i < 3; ++i) {
    auto r = GetJobs(f);
    ASSERT_TRUE(r);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "leader");
  }
  EXPECT_EQ(f.current(), leader.url());
  EXPECT_EQ(standby.hits(), 1) << "once the leader is known, the standby is not asked again";
  EXPECT_EQ(leader.hits(), 3);
}

TEST_P(LeaderFollowerOver, MovesPastAServerThatDoesNotAnswer) {
  Endpoint leader([](const httplib::Request&, httplib::Response& r) { r.set_content("leader", "text/plain"); });
  auto f = Follow({DeadAddress(), leader.url()});
  auto r = GetJobs(f);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.body, "leader");
  EXPECT_EQ(f.current(), leader.url());
}

TEST_P(LeaderFollowerOver, WaitsOutATakeOver) {
  // The leader is gone; the standby leads after its lease (here: its third request).
  std::atomic<int> asked{0};
  Endpoint standby([&](const httplib::Request&, httplib::Response& r) {
    if (++asked < 3) return Standby(r, "");
    r.set_content("new leader", "text/plain");
  });
  auto f = Follow({DeadAddress(), standby.url()});
  auto r = GetJobs(f, true, milliseconds(10'000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "new leader");
  EXPECT_EQ(asked, 3);
  // Out of time, the last answer comes back as it was: the standby's 503.
  std::atomic<int> never{0};
  Endpoint idle([&](const httplib::Request&, httplib::Response& r) { ++never, Standby(r, ""); });
  auto g = Follow({idle.url()});
  auto refused = GetJobs(g, true, milliseconds(1500));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused.status, 503);
  EXPECT_GE(never, 2) << "a lone standby is asked again: a leader will come";
}

TEST_P(LeaderFollowerOver, ALoneServerThatCannotBeReachedIsReportedNotWaitedFor) {
  auto f = Follow({DeadAddress()});
  auto r = GetJobs(f, true, milliseconds(60'000));
  EXPECT_FALSE(r);
  EXPECT_EQ(r.failure, HttpFailure::kConnect);
}

TEST_P(LeaderFollowerOver, ALoneAddressThatStandsForSeveralIsAskedUntilAServerAnswersThere) {
  // One Service address in front of a leader and a standby: during a take-over nothing
  // answers there, then the new leader does.
  const int port = FreeLoopbackPort();
  const std::string url = (tls_endpoints ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port);
  std::unique_ptr<Endpoint> new_leader;
  std::thread take_over([&] {
    std::this_thread::sleep_for(milliseconds(1500));
    new_leader = std::make_unique<Endpoint>(
        [](const httplib::Request&, httplib::Response& r) { r.set_content("new leader", "text/plain"); }, 2, port);
  });
  auto f = Follow({url});
  auto r = f.Send({"GET", "/v1/jobs", {}, "", ""}, true, milliseconds(20'000), true);
  take_over.join();
  ASSERT_TRUE(r) << DescribeFailure(r);
  EXPECT_EQ(r.body, "new leader");
  // Out of time, the address's failure comes back.
  auto g = Follow({DeadAddress()});
  const auto start = std::chrono::steady_clock::now();
  r = g.Send({"GET", "/v1/jobs", {}, "", ""}, true, milliseconds(1500), true);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.failure, HttpFailure::kConnect);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(1500)) << "it waited as told";
}

TEST_P(LeaderFollowerOver, AWriteThatMayHaveArrivedIsSentAgainOnlyWhenThatIsSafe) {
  // A server that reads a request and closes without an answer: it may have applied it.
  HostileServer breaker(tls_endpoints, "", After::kClose);
  Endpoint leader([](const httplib::Request&, httplib::Response& r) { r.set_content("taken", "text/plain"); });
  HttpRequest post{"POST", "/v1/jobs/7/cancel", {}, "", "text/plain"};
  auto unsafe = Follow({breaker.url(), leader.url()});
  auto r = unsafe.Send(post, false, milliseconds(5000));
  EXPECT_FALSE(r);
  EXPECT_TRUE(MayHaveArrived(r.failure));
  EXPECT_EQ(breaker.requests(), 1);
  EXPECT_EQ(leader.hits(), 0) << "not sent twice: it may have been applied";

  auto safe = Follow({breaker.url(), leader.url()});  // say, a submit under an Idempotency-Key
  r = safe.Send(post, true, milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.body, "taken");
  EXPECT_EQ(leader.hits(), 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, LeaderFollowerOver, ::testing::Values("plain", "tls"));

}  // namespace
}  // namespace gantry::testing
