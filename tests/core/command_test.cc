// RunCommand: output and exit codes, a deadline that kills the whole process group, and
// output kept to its cap.
#include "core/command.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gantry {
namespace {

TEST(RunCommand, GivesTheExitCodeTheOutputAndTheEndOfStderr) {
  CommandResult r = RunCommand({"echo \"$1 $2\"; echo $GREETING >&2; exit 3", {"a", "b"}, {{"GREETING", "hi"}}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "a b\n");
  EXPECT_EQ(r.err_tail, "hi\n");
  EXPECT_EQ(r.Outcome(), "exit code 3");
}

TEST(RunCommand, ACommandPastItsDeadlineIsKilledWithEverythingItStarted) {
  auto t0 = std::chrono::steady_clock::now();
  CommandRequest req;
  req.command = "sleep 30 & sleep 30; echo never";
  req.timeout_ms = 300;
  CommandResult r = RunCommand(req);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.Outcome().find("did not finish"), std::string::npos);
}

TEST(RunCommand, OutputIsKeptToItsCap) {
  CommandRequest req;
  req.command = "head -c 100000 /dev/zero | tr '\\0' x";
  req.max_output = 1000;
  CommandResult r = RunCommand(req);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_TRUE(r.out_truncated);
}

}  // namespace
}  // namespace gantry
