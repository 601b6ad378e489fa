// A Slurm user's pipeline through the CLI against the real server and agent: an array
// whose tasks print their index, a job that runs after the array succeeded, and the
// tables that show an array as one row.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using WorkflowCli = ServerTest;

TEST_F(WorkflowCli, AnArrayThenAJobAfterIt) {
  int rc = 0;
  std::string out =
      Cli("submit -o json -g 1 -t T4 --array 0-3%2 -- sh -c 'echo task $SLURM_ARRAY_TASK_ID of $GANTRY_ARRAY_JOB_ID; "
          "sleep 1'",
          kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string array = nlohmann::json::parse(out.substr(out.find('{')))["id"];
  out = Cli("submit -g 1 -t T4 -d afterok:" + array + " --name merge -- echo merged", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string merge = out.substr(out.find("job ") + 4, out.find(' ', out.find("job ") + 4) - out.find("job ") - 4);
  // A queue while the array runs (each task takes a second) lists the dependent job with
  // its reason.
  out = Cli("queue", kAliceToken, &rc);
  EXPECT_NE(out.find("afterok: waits for job " + array), std::string::npos) << out;
  ASSERT_EQ(WaitFor(merge, "succeeded"), "succeeded");
  for (int task = 0; task < 4; ++task) {
    std::string id = fmt::format("{}_{}", array, task);
    EXPECT_EQ(WaitFor(id, "succeeded"), "succeeded") << id;
    out = Cli("logs " + id, kAliceToken, &rc);
    EXPECT_NE(out.find(fmt::format("task {} of {}", task, array)), std::string::npos) << id << ": " << out;
  }
  // The four finished tasks are one row of `gantry jobs`.
  out = Cli("jobs", kAliceToken, &rc);
  EXPECT_NE(out.find(array + "_[0-3]"), std::string::npos) << out;
}

}  // namespace
}  // namespace gantry::testing
