// A Slurm user's pipeline through the CLI against the real server and agent: an array
// whose tasks print their index, a job that runs after the array succeeded, and the
// tables that show an array as one row.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
  std::string merge = JobIdIn(out);
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

// srun's contract: the output as it comes, and the job's exit code as the command's.
TEST_F(WorkflowCli, RunStreamsTheOutputAndExitsWithTheJobsCode) {
  int rc = 0;
  std::string out = Cli("run -g 1 -t T4 -- sh -c 'echo to-stdout; echo to-stderr >&2; exit 3'", kAliceToken, &rc);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("to-stdout"), std::string::npos) << out;
  EXPECT_NE(out.find("to-stderr"), std::string::npos) << out;
  std::string id = JobIdIn(out);
  // wait and logs -f say the same of the ended job.
  out = Cli("wait " + id, kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("job " + id + ": failed"), std::string::npos) << out;
  out = Cli("logs -f " + id, kAliceToken, &rc);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_EQ(Cli("run -g 1 -t T4 -- true", kAliceToken, &rc).find("gantry: job"), 0u);
  EXPECT_EQ(rc, 0);
  // A run without a command is refused before anything is submitted.
  out = Cli("run -g 1", kAliceToken, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("command"), std::string::npos) << out;
}

TEST_F(WorkflowCli, CtrlCDuringRunCancelsTheJob) {
  std::string out;
  // A background job of a script ignores SIGINT until the CLI installs its handler: wait
  // until the job runs before pressing Ctrl-C.
  int rc = RunCommand(
      fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} run -g 1 -t T4 -- sleep 60 2>&1 & pid=$!; "
                  "for i in $(seq 100); do sleep 0.1; "
                  "GANTRY_SERVER={} GANTRY_TOKEN={} {} jobs --state running | grep -q ' running ' && break; "
                  "done; kill -INT $pid; wait $pid",
                  server_->address(), kAliceToken, GANTRY_BINARY, server_->address(), kAliceToken, GANTRY_BINARY),
      &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cancelling job"), std::string::npos) << out;
  std::string id = JobIdIn(out);
  EXPECT_EQ(WaitFor(id, "cancelled"), "cancelled");
}

// The half-submitted file: lines 1 and 3 good, 2, 4 and 5 bad. Now every bad line
// is listed (those the client reads and those only the server can judge) and nothing is
// submitted.
TEST_F(WorkflowCli, AJobsFileIsSubmittedWholeOrNotAtAll) {
  std::string file = TempPath("jobs.txt");
  std::ofstream(file) << "2,train.py,,,A100-80GB\n"
                      << "1,,,,T4\n"
                      << "0,eval.sh,,,T4\n"
                      << "1,x.sh,,\n"
                      << "1,pin.sh,,,0;x1\n";
  int rc = 0;
  std::string out = Cli("submit --jobs-file " + file, kAliceToken, &rc);
  EXPECT_EQ(rc, 2) << out;
  for (const char* line : {"line 2: script", "line 4"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << " in " << out;
  }
  // Lines only the server can judge: the whole file is refused, each line named. GPU
  // indices pin GPUs on a single-node server only (this one has two nodes).
  std::ofstream(file) << "2,train.py,,,A100-80GB\n"
                      << "0,eval.sh,,,Z100\n"
                      << "1,go.sh,,,T4\n"
                      << "1,pin.sh,,,0;1\n";
  out = Cli("submit --jobs-file " + file, kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(file + ":2: refused: gpu_types"), std::string::npos) << out;
  EXPECT_NE(out.find(file + ":4: refused: gpu_indices: GPU indices pin GPUs on a single-node server"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("nothing was submitted"), std::string::npos) << out;
  EXPECT_TRUE(Json(server_->Client(kAliceToken).Get("/v1/jobs"))["jobs"].empty());
}

TEST_F(WorkflowCli, DryRunSaysWhatWouldHappenAndSubmitsNothing) {
  int rc = 0;
  std::string out = Cli("submit --dry-run -g 1 -t T4 -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("job: would start now on t4-0["), std::string::npos) << out;
  out = Cli("submit --dry-run -g 64 -t A100-80GB -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("job: refused: gpus"), std::string::npos) << out;
  std::string file = TempPath("jobs.txt");
  std::ofstream(file) << "1,a.sh,,,A100-80GB\n"
                      << "1,b.sh,,,8\n";
  out = Cli("submit --dry-run --jobs-file " + file, kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(file + ":1: would start now on a100-80gb-0["), std::string::npos) << out;
  EXPECT_NE(out.find(file + ":2: refused"), std::string::npos) << out;
  EXPECT_TRUE(Json(server_->Client(kAliceToken).Get("/v1/jobs"))["jobs"].empty());
}

// The errors the issue found misleading, each now saying what is wrong.
TEST_F(WorkflowCli, ErrorsSayWhatIsWrong) {
  std::string home = TempPath("home");
  std::filesystem::create_directories(home + "/.config/gantry");
  std::ofstream(home + "/tok") << kAliceToken << "\n";
  std::ofstream(home + "/.config/gantry/config.yaml") << "token_file: ~/tok\n";
  auto gantry = [&](const std::string& env, const std::string& args, int* rc) {
    std::string out;
    *rc = RunCommand(fmt::format("env -u GANTRY_TOKEN -u GANTRY_TOKEN_FILE HOME={} GANTRY_SERVER={} {} {} {} 2>&1",
                                 home, server_->address(), env, GANTRY_BINARY, args),
                     &out);
    return out;
  };
  int rc = 0;
  std::string out = gantry("", "jobs", &rc);  // token_file: ~/tok, from the config file
  EXPECT_EQ(rc, 0) << out;
  out = gantry("GANTRY_TOKEN_FILE=/nonexistent", "jobs", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("GANTRY_TOKEN_FILE: cannot read the token file /nonexistent"), std::string::npos) << out;
  out = gantry("GANTRY_SERVER=http://127.0.0.1:9", "jobs", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("connection refused or unreachable"), std::string::npos) << out;
  out = gantry("", "run -g 1 -t T4 --workdir /nonexistent -- true", &rc);
  EXPECT_EQ(rc, 127) << out;
  std::string id = JobIdIn(out);
  out = gantry("", "job " + id, &rc);
  EXPECT_NE(out.find("working_dir: no directory /nonexistent"), std::string::npos) << out;
  out = gantry("", "queue --explain 999", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no job 999"), std::string::npos) << out;
}

TEST_F(WorkflowCli, AnIdIsOneIdNeverAnotherPathOrQuery) {
  auto gantry = [&](const std::string& args) {
    std::string out;
    RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} {} 2>&1", server_->address(), kAliceToken,
                           GANTRY_BINARY, args),
               &out);
    return out;
  };
  gantry("submit -g 2 -t T4 --estimate 1h -- sleep 600");               // takes both T4s
  std::string out = gantry("submit -g 2 -t T4 --estimate 1m -- true");  // so this one waits
  std::string id = JobIdIn(out);
  ASSERT_FALSE(id.empty()) << out;
  out = gantry("hold " + id);
  ASSERT_TRUE(Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id)).contains("held")) << id << ": " << out;
  // Sent raw, '4/release#' would be POST /v1/jobs/4/release (and '#' ends the path): the
  // hold of a made-up id must not become a release, nor '4?' a cancel of job 4.
  gantry("hold '" + id + "/release#'");
  gantry("cancel '" + id + "?'");
  gantry("release '" + id + "%3F'");
  nlohmann::json job = Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id));
  EXPECT_EQ(job["state"], "pending") << job.dump();
  EXPECT_TRUE(job.contains("held")) << job.dump();
}

}  // namespace
}  // namespace gantry::testing
