// Reading /proc and files another process removes: "gone" is an answer, never an
// exception. Before, an ifstream whose process exited between open and read threw
// std::ios_base::failure from its stream buffer and aborted the standalone server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "agent/local_agent.h"
#include "agent/process.h"
#include "agent/report_sink.h"
#include "core/read_file.h"
#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

// The exact failure: a /proc file opened while its process lived, read after it was reaped.
TEST(ProcRace, AFileOfAReapedProcessReadsAsGone) {
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  std::string stat = "/proc/" + std::to_string(child) + "/stat";
  ASSERT_TRUE(ReadFileNoThrow(stat).has_value());
  int fd = open(stat.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  char buf[64];
  EXPECT_LT(read(fd, buf, sizeof(buf)), 0) << "the kernel answers ESRCH for a reaped process";
  close(fd);
  EXPECT_FALSE(ReadFileNoThrow(stat).has_value());
  EXPECT_FALSE(IsLiveShim(child));
}

// Many short-lived processes read while they exit: the agent's readers never throw.
TEST(ProcRace, ReadersOfExitingProcessesNeverThrow) {
  std::string dir = TempPath("agent");
  ReportSink reports;
  LocalAgent agent(LocalAgentOptions{.state_dir = dir, .shim = GANTRY_BINARY, .poll_ms = 20}, reports);
  std::atomic<bool> stop{false};
  std::atomic<pid_t> latest{0};
  std::thread churn([&] {
    while (!stop) {
      pid_t p = fork();
      if (p == 0) _exit(0);
      latest = p;
      waitpid(p, nullptr, 0);
    }
  });
  int reads = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    pid_t p = latest;
    EXPECT_NO_THROW({
      agent.JobOfPid(p);
      IsLiveShim(p);
      SessionRssMib(p);
    });
    ++reads;
  }
  stop = true;
  churn.join();
  EXPECT_GT(reads, 10);
}

}  // namespace
}  // namespace gantry::testing
