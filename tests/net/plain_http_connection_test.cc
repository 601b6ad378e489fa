// The CLI's plain-HTTP transport against a real HTTP server on loopback: addresses with a
// path prefix or an IPv6 host, one kept connection for several requests, a new one after
// the server closed the kept one, chunked answers, and header names read without case.
#include "net/plain_http_connection.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <set>
#include <thread>

namespace gantry::testing {
namespace {

// An HTTP server on a loopback port that remembers each request's path, Host header and
// client port (one port per connection).
class Recorder {
 public:
  Recorder() {
    auto record = [this](const httplib::Request& q, httplib::Response& r) {
      std::lock_guard<std::mutex> lock(mu_);
      paths_.push_back(q.path);
      hosts_.push_back(q.get_header_value("Host"));
      ports_.insert(q.remote_port);
      bodies_.push_back(q.body);
      if (q.has_header("X-Evil")) ++injected_;
      r.set_header("X-Log-Offset", "42");
      r.set_content("{\"ok\": true}", "application/json");
    };
    // Before the catch-all routes: cpp-httplib takes the first route that matches.
    server_.Get("/chunked", [](const httplib::Request&, httplib::Response& r) {
      r.set_chunked_content_provider("text/plain", [](size_t offset, httplib::DataSink& sink) {
        if (offset >= 3 * 5000) {
          sink.done();
          return true;
        }
        std::string part(5000, static_cast<char>('a' + offset / 5000));
        sink.write(part.data(), part.size());
        return true;
      });
    });
    server_.Get(".*", record);
    server_.Post(".*", record);
    server_.set_keep_alive_timeout(1);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Recorder() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& prefix = "") const { return "http://127.0.0.1:" + std::to_string(port_) + prefix; }
  int port() const { return port_; }
  std::vector<std::string> paths() {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }
  std::vector<std::string> hosts() {
    std::lock_guard<std::mutex> lock(mu_);
    return hosts_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  int injected() const { return injected_; }
  size_t connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return ports_.size();
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> paths_, hosts_, bodies_;
  std::set<int> ports_;
  std::atomic<int> injected_{0};
};

HttpRequest Get(const std::string& path) { return {"GET", path, {}, "", ""}; }

TEST(ServerAddress, SplitsHostPortAndPrefix) {
  auto a = SplitServerAddress("https://[::1]:8443/gantry/");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->scheme, "https");
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8443);
  EXPECT_EQ(a->prefix, "/gantry");
  EXPECT_EQ(HostAndPort(*a), "[::1]:8443");
  auto plain = SplitServerAddress("http://gantry.example");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 80);
  EXPECT_EQ(plain->prefix, "");
  for (const char* bad :
       {"http://a:0", "http://a:65536", "http://a:8x", "http://:80", "http://[::1", "ftp://a", "a:80"}) {
    auto r = SplitServerAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().field(), "server") << bad;
    }
  }
}

TEST(PlainHttp, SendsUnderTheAddressPrefixWithItsHostAndReadsTheAnswer) {
  Recorder server;
  auto c = ConnectPlainHttp(server.url("/gantry/"), {});
  HttpRequest post{"POST", "/v1/jobs?x=1", {{"Idempotency-Key", "k1"}}, R"({"gpus": 1})", "application/json"};
  HttpResponse r = c->Send(post);
  ASSERT_TRUE(r) << DescribeFailure(r);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"ok\": true}");
  EXPECT_EQ(r.Header("content-type"), "application/json") << "header names are read without case";
  EXPECT_EQ(r.Header("x-log-offset"), "42");
  EXPECT_EQ(server.paths(), std::vector<std::string>{"/gantry/v1/jobs"});
  EXPECT_EQ(server.hosts(), std::vector<std::string>{"127.0.0.1:" + std::to_string(server.port())});
  EXPECT_EQ(server.bodies(), std::vector<std::string>{R"({"gpus": 1})"});
}

TEST(PlainHttp, KeepsOneConnectionAndOpensANewOneAfterTheServerClosedIt) {
  Recorder server;
  auto c = ConnectPlainHttp(server.url(), {});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->Send(Get("/v1/jobs")));
  EXPECT_EQ(server.connections(), 1u) << "three requests on one kept connection";
  // The server closes a connection idle for a second; the next request must not fail on it.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  HttpResponse r = c->Send(Get("/v1/jobs"));
  ASSERT_TRUE(r) << DescribeFailure(r) << ": a request on a connection the server had closed";
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(server.connections(), 2u);
}

TEST(PlainHttp, ALineBreakInAPathOrHeaderAddsNoHeader) {
  Recorder server;
  auto c = ConnectPlainHttp(server.url(), {});
  HttpResponse r = c->Send(Get("/v1/jobs/1 HTTP/1.1\r\nX-Evil: 1\r\n\r\nGET /x"));
  ASSERT_TRUE(r) << DescribeFailure(r);
  // Sent raw, the path would end the request line, add X-Evil and start a second request.
  EXPECT_LE(server.paths().size(), 1u) << "one request, not two";
  HttpResponse header = c->Send({"GET", "/v1/jobs", {{"Authorization", "Bearer t\r\nX-Evil: 1"}}, "", ""});
  EXPECT_EQ(header.failure, HttpFailure::kUnsupported);
  EXPECT_NE(DescribeFailure(header).find("Authorization"), std::string::npos) << DescribeFailure(header);
  EXPECT_EQ(server.injected(), 0);
}

TEST(PlainHttp, ReadsAChunkedAnswer) {
  Recorder server;
  HttpResponse r = ConnectPlainHttp(server.url(), {})->Send(Get("/chunked"));
  ASSERT_TRUE(r) << DescribeFailure(r);
  EXPECT_EQ(r.body, std::string(5000, 'a') + std::string(5000, 'b') + std::string(5000, 'c'));
}

TEST(PlainHttp, AnAddressItCannotReachFailsNamingWhy) {
  HttpResponse tls = ConnectPlainHttp("https://127.0.0.1:1", {})->Send(Get("/"));
  EXPECT_EQ(tls.failure, HttpFailure::kUnsupported);
  EXPECT_NE(DescribeFailure(tls).find("http:// only"), std::string::npos) << DescribeFailure(tls);
  HttpResponse bad = ConnectPlainHttp("http://[::1", {})->Send(Get("/"));
  EXPECT_EQ(bad.failure, HttpFailure::kUnsupported);
  EXPECT_FALSE(MayHaveArrived(bad.failure));
}

}  // namespace
}  // namespace gantry::testing
