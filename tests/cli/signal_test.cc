// Every long-running command ends within two seconds of SIGTERM or SIGINT, whatever it is
// doing: an agent retrying an unreachable server, a server serving, a CLI waiting on a job,
// following its logs, running it, or retrying a server that does not answer.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "loopback.h"
#include "server/controller_harness.h"
#include "server/server_process.h"

namespace gantry::testing {
namespace {

// A stop is prompt under this: well inside the 30 s Kubernetes and the 90 s systemd wait
// before a SIGKILL (what these tests guard against: a process that ignores the signal),
// with room for a sanitized build on a busy machine.
constexpr double kStopSeconds = 8.0;

// A `gantry` command started with `args` (its output to DIR/out.log), signalled later.
class Command {
 public:
  Command(const std::string& dir, std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::filesystem::create_directories(dir);
    log_ = dir + "/out.log";
    pid_ = fork();
    if (pid_ == 0) {
      if (!freopen(log_.c_str(), "w", stdout) || !freopen(log_.c_str(), "a", stderr)) _exit(127);
      for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
      args.insert(args.begin(), GANTRY_BINARY);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Command() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool Running() { return pid_ > 0 && waitpid(pid_, &status_, WNOHANG) == 0; }
  // Sends `sig`; the seconds until the process ended (99 when it did not within 5 s).
  // Seconds from `sig` to the process's exit; 99 when it has not exited after 15 s.
  double SecondsToExit(int sig) {
    auto t0 = std::chrono::steady_clock::now();
    kill(pid_, sig);
    for (int i = 0; i < 1500; ++i) {
      if (waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 99;
  }
  std::string Output() const { return ReadFileNoThrow(log_).value_or(""); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = 0;
};

std::string Unreachable() { return fmt::format("http://127.0.0.1:{}", FreeLoopbackPort()); }

// Before: the agent ignored SIGTERM while no server answered ("no server reachable ...;
// retrying") and had to be killed with SIGKILL.
TEST(Signals, AnAgentRetryingAnUnreachableServerStops) {
  for (int sig : {SIGTERM, SIGINT}) {
    std::string dir = TempPath("signal-agent");
    std::filesystem::remove_all(dir);
    Command agent(dir, {"agent", "--server", Unreachable(), "--token", "t", "--node-id", "n1", "--fake-gpus", "1xT4",
                        "--data-dir", dir + "/agent"});
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ASSERT_TRUE(agent.Running()) << agent.Output();
    EXPECT_LT(agent.SecondsToExit(sig), kStopSeconds) << agent.Output();
  }
}

class SignalsWithServer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("signal-server");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "1x2xT4");
    server_->Start();
    auto alice = server_->Client(kAliceToken);
    job_ = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "while true; do echo tick; sleep 0.2; done"})",
                           "application/json"))
               .value("id", "");
    ASSERT_FALSE(job_.empty());
  }
  std::vector<std::string> Env() const {
    return {"GANTRY_SERVER=" + server_->address(), std::string("GANTRY_TOKEN=") + kAliceToken};
  }
  std::string dir_, job_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SignalsWithServer, WaitLogsFollowAndRunStop) {
  const std::vector<std::vector<std::string>> commands = {
      {"wait", job_}, {"logs", "-f", job_}, {"run", "-g", "1", "--", "sleep", "60"}};
  for (const auto& args : commands) {
    for (int sig : {SIGTERM, SIGINT}) {
      Command c(dir_ + "/cli", args, Env());
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      ASSERT_TRUE(c.Running()) << args[0] << ": " << c.Output();
      EXPECT_LT(c.SecondsToExit(sig), kStopSeconds) << args[0] << ": " << c.Output();
    }
  }
}

TEST_F(SignalsWithServer, ACliRetryingAServerThatDoesNotAnswerStops) {
  Command c(dir_ + "/cli", {"queue"}, {"GANTRY_SERVER=" + Unreachable(), std::string("GANTRY_TOKEN=") + kAliceToken});
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  if (c.Running()) {
    EXPECT_LT(c.SecondsToExit(SIGTERM), kStopSeconds) << c.Output();
  }
}

TEST_F(SignalsWithServer, TheServerStops) {
  double took = 0;
  auto t0 = std::chrono::steady_clock::now();
  server_->Kill(SIGTERM);  // waits for it
  took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, kStopSeconds);
}

}  // namespace
}  // namespace gantry::testing
