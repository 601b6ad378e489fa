// gantry logs -f against a scripted server: the follower must not stop on a job that ended
// between two reads of one pass, before it read the bytes that came with the end.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>

#include "command_util.h"

namespace gantry::testing {
namespace {

// A two-rank job's log endpoint. Rank 0's line and the job's end come together, at the
// first read of rank 1: the pass that read rank 0 empty while the job ran then sees
// "failed" at its last read.
class ScriptedLogs {
 public:
  ScriptedLogs() {
    server_.Get("/v1/jobs/1/logs", [this](const httplib::Request& req, httplib::Response& res) {
      int rank = std::stoi(req.get_param_value("rank"));
      int64_t offset = std::stoll(req.get_param_value("offset"));
      if (rank == 1) ended_ = true;
      std::string body = rank == 0 && ended_ && offset == 0 ? "hello from 0\n" : "";
      res.set_header("X-Log-Offset", std::to_string(offset + static_cast<int64_t>(body.size())));
      res.set_header("X-Log-Run", "1");
      res.set_header("X-Log-Ranks", "2");
      res.set_header("X-Job-State", ended_ ? "failed" : "running");
      res.set_content(body, "text/plain");
    });
    server_.Get("/v1/jobs/1", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"id": "1", "state": "failed", "exit_code": 4})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedLogs() {
    server_.stop();
    thread_.join();
  }
  std::string address() const { return fmt::format("http://127.0.0.1:{}", port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> ended_{false};
};

TEST(LogFollow, AJobThatEndsBetweenTwoReadsOfAPassIsReadToItsEnd) {
  ScriptedLogs logs;
  std::string out;
  int rc =
      RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN=t {} logs -f 1 2>&1", logs.address(), GANTRY_BINARY), &out);
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find("[rank 0] hello from 0\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace gantry::testing
