// The CLI's plain-HTTP transport against a hostile server: an address a user was given (or
// a machine in the middle of a plain-HTTP connection) that answers to exhaust or hang the
// client. Each answer must end the request with a failure, promptly and without holding
// what the server claims to send: headers past 64 KiB, a body said to be a terabyte, an
// answer that never comes, one dripped a byte at a time forever, and a second answer glued
// to the first (never read as the next request's answer).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "loopback.h"
#include "net/plain_http_connection.h"

namespace gantry::testing {
namespace {

// A raw TCP server on loopback: reads one request per connection, then writes `answer`
// (`later` on the connections after the first, when given) and then, by `after`: closes,
// drips one more byte every 50 ms until the client goes away, holds the connection open, or
// sends `later` again and again as fast as it can until the client goes away.
enum class After { kClose, kDrip, kHold, kFlood };
class HostileServer {
 public:
  HostileServer(std::string answer, After after, std::string later = "")
      : answer_(std::move(answer)), later_(std::move(later)), after_(after) {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        const bool again = after_ != After::kFlood && connections_++ > 0 && !later_.empty();
        const std::string& answer = again ? later_ : answer_;
        char buf[4096];
        if (read(c, buf, sizeof(buf)) > 0) send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
        while (after_ == After::kFlood && !stop_ && send(c, later_.data(), later_.size(), MSG_NOSIGNAL) > 0) {
        }
        while (after_ == After::kDrip && !stop_ && send(c, "x", 1, MSG_NOSIGNAL) == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (after_ == After::kHold) {  // served on another thread, so the next client is not kept waiting
          held_.emplace_back([this, c] {
            while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            close(c);
          });
          continue;
        }
        close(c);
      }
    });
  }
  ~HostileServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (std::thread& t : held_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string answer_;
  std::string later_;
  After after_;
  std::atomic<int> connections_{0};
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> held_;  // the accept thread's alone until it is joined
};

std::unique_ptr<HttpConnection> ConnectTo(const HostileServer& s) {
  HttpConnectionOptions o;
  o.read_timeout = std::chrono::seconds(2);
  return ConnectPlainHttp(s.url(), o);
}

HttpResponse SendTo(const HostileServer& s) { return ConnectTo(s)->Send({"GET", "/v1/jobs", {}, "", ""}); }

TEST(HostileServer, HeadersPast64KiBEndTheRequest) {
  std::string answer = "HTTP/1.1 200 OK\r\nX-Junk: " + std::string(100 * 1024, 'a') + "\r\n\r\n";
  HostileServer s(answer, After::kClose);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead) << "headers of 100 KiB taken: " << r.status;
}

TEST(HostileServer, ABodySaidToBeATerabyteIsRefusedNotAwaited) {
  HostileServer s("HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\nabc", After::kDrip);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_NE(r.failure_detail.find("body limit"), std::string::npos) << r.failure_detail;
}

TEST(HostileServer, AnAnswerThatNeverComesEndsAtTheReadTimeout) {
  HostileServer s("", After::kHold);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_TRUE(MayHaveArrived(r.failure)) << "the server read the request: it may have applied it";
}

TEST(HostileServer, AnAnswerDrippedForeverEndsAtTheReadTimeout) {
  // Chunked, one byte of a never-ending chunk every 50 ms: each read makes progress, so
  // only a deadline on the whole answer (not on each read) ends it.
  HostileServer s("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\n", After::kDrip);
  HttpResponse r = SendTo(s);
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_NE(r.failure_detail.find("timeout"), std::string::npos) << r.failure_detail;
}

// Parts of an answer no body limit covers: a chunk-size line or extension that never ends,
// trailers without end, interim answers without end. Each ends the request (before the
// read budget and buffer caps, each of these grew the client by gigabytes until the kernel
// killed it, or spun a core past the deadline).
TEST(HostileServer, EndlessChunkLinesTrailersAndInterimAnswersEndTheRequest) {
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  struct Case {
    const char* what;
    std::string first, flood;
  };
  for (const Case& c : {Case{"an endless chunk extension", chunked + "1;", std::string(64 * 1024, 'a')},
                        Case{"an endless chunk-size line", chunked, std::string(64 * 1024, '0')},
                        Case{"endless trailers", chunked + "0\r\n", "X-Trailer: v\r\n"},
                        Case{"endless interim answers", "", "HTTP/1.1 100 Continue\r\n\r\n"}}) {
    HostileServer s(c.first, After::kFlood, c.flood);
    HttpResponse r = SendTo(s);
    EXPECT_EQ(r.failure, HttpFailure::kRead) << c.what << ": " << r.status;
  }
}

TEST(HostileServer, BytesPastAnAnswerAreNeverReadAsTheNextAnswer) {
  // The first connection gets its answer with a forged second one glued on, and is held
  // open; a kept connection would hand the forgery to the next request.
  HostileServer s(
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"
      "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged",
      After::kHold, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB");
  auto c = ConnectTo(s);
  HttpResponse first = c->Send({"GET", "/v1/jobs/1", {}, "", ""});
  ASSERT_TRUE(first) << DescribeFailure(first);
  EXPECT_EQ(first.body, "A");
  HttpResponse second = c->Send({"GET", "/v1/jobs/2", {}, "", ""});
  ASSERT_TRUE(second) << DescribeFailure(second);
  EXPECT_EQ(second.body, "B") << "the glued answer was taken as the second request's";
}

}  // namespace
}  // namespace gantry::testing
