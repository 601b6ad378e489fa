// Both HTTP transports (plain and TLS) against a hostile server: an address a user was
// given (or a machine in the middle of a plain-HTTP connection) that answers to exhaust or hang the
// client. Each answer must end the request with a failure, promptly and without holding
// what the server claims to send: headers past 64 KiB, a body said to be a terabyte, an
// answer that never comes, one dripped a byte at a time forever, and a second answer glued
// to the first (never read as the next request's answer).
#include "hostile_server.h"

#include <gtest/gtest.h>

#include <string>

#include "net/plain_http_connection.h"
#include "net/tls_http_connection.h"

namespace gantry::testing {
namespace {

// Each attack runs against both transports: plain HTTP (the CLI's) and TLS (the agent's and
// gantryd's for https://).
class HostileServerTo : public ::testing::TestWithParam<std::string> {
 protected:
  bool Tls() const { return GetParam() == "tls"; }
  std::unique_ptr<HttpConnection> ConnectTo(const HostileServer& s) {
    HttpConnectionOptions o;
    o.read_timeout = std::chrono::seconds(2);
    if (!Tls()) return ConnectPlainHttp(s.url(), o);
    o.ca_cert = SharedTestCertificates() + "/ca.pem";
    return ConnectTls(s.url(), o);
  }
  HttpResponse SendTo(const HostileServer& s) { return ConnectTo(s)->Send({"GET", "/v1/jobs", {}, "", ""}); }
};

INSTANTIATE_TEST_SUITE_P(Transports, HostileServerTo, ::testing::Values("plain", "tls"),
                         [](const auto& info) { return info.param; });

TEST_P(HostileServerTo, HeadersPast64KiBEndTheRequest) {
  std::string answer = "HTTP/1.1 200 OK\r\nX-Junk: " + std::string(100 * 1024, 'a') + "\r\n\r\n";
  HostileServer s(Tls(), answer, After::kClose);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead) << "headers of 100 KiB taken: " << r.status;
}

TEST_P(HostileServerTo, ABodySaidToBeATerabyteIsRefusedNotAwaited) {
  HostileServer s(Tls(), "HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\nabc", After::kDrip);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_NE(r.failure_detail.find("body limit"), std::string::npos) << r.failure_detail;
}

TEST_P(HostileServerTo, AnAnswerThatNeverComesEndsAtTheReadTimeout) {
  HostileServer s(Tls(), "", After::kHold);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_TRUE(MayHaveArrived(r.failure)) << "the server read the request: it may have applied it";
}

TEST_P(HostileServerTo, AnAnswerDrippedForeverEndsAtTheReadTimeout) {
  // One byte every 50 ms, of a never-ending chunk or a never-ending header: each read makes
  // progress, so only a deadline on the whole answer (not on each read) ends it.
  for (const char* start :
       {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\n", "HTTP/1.1 200 OK\r\nX-Slow: "}) {
    HostileServer s(Tls(), start, After::kDrip);
    auto begun = std::chrono::steady_clock::now();
    HttpResponse r = SendTo(s);
    EXPECT_EQ(r.failure, HttpFailure::kRead) << start;
    EXPECT_NE(r.failure_detail.find("timeout"), std::string::npos) << r.failure_detail;
    EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(10)) << start;
  }
}

// Parts of an answer no body limit covers: a chunk-size line or extension that never ends,
// trailers without end, interim answers without end. Each ends the request (before the
// read budget and buffer caps, each of these grew the client by gigabytes until the kernel
// killed it, or spun a core past the deadline).
TEST_P(HostileServerTo, EndlessChunkLinesTrailersAndInterimAnswersEndTheRequest) {
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  struct Case {
    const char* what;
    std::string first, flood;
  };
  for (const Case& c : {Case{"an endless chunk extension", chunked + "1;", std::string(64 * 1024, 'a')},
                        Case{"an endless chunk-size line", chunked, std::string(64 * 1024, '0')},
                        Case{"endless trailers", chunked + "0\r\n", "X-Trailer: v\r\n"},
                        Case{"endless interim answers", "", "HTTP/1.1 100 Continue\r\n\r\n"}}) {
    HostileServer s(Tls(), c.first, After::kFlood, c.flood);
    HttpResponse r = SendTo(s);
    EXPECT_EQ(r.failure, HttpFailure::kRead) << c.what << ": " << r.status;
  }
}

TEST_P(HostileServerTo, BytesPastAnAnswerAreNeverReadAsTheNextAnswer) {
  // The first connection gets its answer with a forged second one glued on (in the same
  // write, or in a write and over TLS a record of its own), and is held open; a kept
  // connection would hand the forgery to the next request.
  for (const std::string& glue : {std::string(), std::string(1, '\0')}) {
    HostileServer s(
        Tls(),
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA" + glue + "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged",
        After::kHold, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB");
    auto c = ConnectTo(s);
    HttpResponse first = c->Send({"GET", "/v1/jobs/1", {}, "", ""});
    ASSERT_TRUE(first) << DescribeFailure(first);
    EXPECT_EQ(first.body, "A");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the forgery has come
    HttpResponse second = c->Send({"GET", "/v1/jobs/2", {}, "", ""});
    ASSERT_TRUE(second) << DescribeFailure(second);
    EXPECT_EQ(second.body, "B") << "the glued answer was taken as the second request's (glue " << glue.size() << ")";
  }
}

// A server whose certificate the client cannot trust, or which is not for the host the
// client asked for, gets no request: the token would go to whoever holds that certificate.
TEST(TlsTransport, AServerItCannotVerifyForTheHostAskedForGetsNoRequest) {
  HostileServer s(true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", After::kClose);
  HttpConnectionOptions trusting;
  trusting.ca_cert = SharedTestCertificates() + "/ca.pem";
  HttpRequest get{"GET", "/v1/jobs", {{"Authorization", "Bearer secret"}}, "", ""};
  HttpResponse r = ConnectTls(s.url(), trusting)->Send(get);
  ASSERT_TRUE(r) << DescribeFailure(r);
  EXPECT_EQ(r.body, "ok");
  // The system's CAs do not know the test CA.
  r = ConnectTls(s.url(), HttpConnectionOptions{})->Send(get);
  EXPECT_EQ(r.failure, HttpFailure::kTlsUntrusted) << DescribeFailure(r);
  // The certificate is for 127.0.0.1, not for the name localhost.
  std::string by_name = s.url();
  by_name.replace(by_name.find("127.0.0.1"), 9, "localhost");
  r = ConnectTls(by_name, trusting)->Send(get);
  EXPECT_EQ(r.failure, HttpFailure::kTlsUntrusted) << DescribeFailure(r);
  EXPECT_NE(r.failure_detail.find("localhost"), std::string::npos) << r.failure_detail;
  EXPECT_EQ(s.requests(), 1) << "only the verified connection carried a request";
  // A CA file that cannot be read is said, and nothing is sent.
  trusting.ca_cert = "/nonexistent/ca.pem";
  r = ConnectTls(s.url(), trusting)->Send(get);
  EXPECT_FALSE(r);
  EXPECT_NE(r.failure_detail.find("/nonexistent/ca.pem"), std::string::npos) << r.failure_detail;
}

}  // namespace
}  // namespace gantry::testing
