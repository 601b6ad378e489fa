// What a researcher new to Gantry tripped over in the CLI, each as the command they typed,
// against the real server (4 A100-80GB and 2 T4, standalone): another team's busy GPUs
// show busy in `gantry nodes`; `gantry jobs` filters like squeue and says why pending jobs
// wait; `gantry logs` of a pending job says so; array tasks are spoken of by their array
// ids; `gantry update` says what changed; `gantry job` shows the container, notifications
// and a readable history.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using CliFrictions = ServerTest;

// The line of `gantry nodes` for the A100 node.
std::string A100Line(const std::string& nodes) {
  size_t at = nodes.find("A100-80GB");
  EXPECT_NE(at, std::string::npos) << nodes;
  size_t from = nodes.rfind('\n', at) + 1;
  return nodes.substr(from, nodes.find('\n', at) - from);
}

TEST_F(CliFrictions, AnotherTeamsBusyGpusShowBusyNotIdle) {
  int rc = 0;
  std::string id = JsonIn(Cli("submit -o json -g 4 -t A100-80GB -- sleep 60", kAliceToken, &rc))["id"];
  ASSERT_EQ(WaitFor(id, "running"), "running");
  std::string as_bob = A100Line(Cli("nodes", kBobToken));
  EXPECT_NE(as_bob.find("0:other 1:other 2:other 3:other"), std::string::npos) << as_bob;
  EXPECT_EQ(as_bob.find(id + " "), std::string::npos) << "no names of another team's jobs: " << as_bob;
  EXPECT_NE(as_bob.find("   4     0  "), std::string::npos) << "4 GPUs, none idle: " << as_bob;
  std::string as_alice = A100Line(Cli("nodes", kAliceToken));
  EXPECT_NE(as_alice.find("0:" + id + " "), std::string::npos) << as_alice;
  // Its owner sees the devices it holds, by UUID, as CUDA_VISIBLE_DEVICES names them.
  std::string job = Cli("job " + id);
  EXPECT_NE(job.find("  GPU        a100-80gb-0:3 GPU-fake-a100-80gb-0-3\n"), std::string::npos) << job;
}

TEST_F(CliFrictions, JobsFiltersLikeSqueueAndSaysWhyPendingJobsWait) {
  int rc = 0;
  std::string big = JsonIn(Cli("submit -o json -J big -g 4 -t A100-80GB -- sleep 60"))["id"];
  ASSERT_EQ(WaitFor(big, "running"), "running");
  std::string next = JsonIn(Cli("submit -o json -J next -g 4 -t A100-80GB --estimate 5m -- true"))["id"];
  std::string done = JsonIn(Cli("submit -o json -J quick -g 1 -t T4 -- true"))["id"];
  std::string llama = JsonIn(Cli("submit -o json -J llama-7b-finetune-lr3e-4-warmup -g 1 -t T4 -- true"))["id"];
  ASSERT_EQ(WaitFor(llama, "succeeded"), "succeeded");
  EXPECT_NE(Cli("jobs").find(" llama-7b-finetune-lr3e-4-warmup "), std::string::npos) << "names are not cut";
  ASSERT_EQ(WaitFor(done, "succeeded"), "succeeded");
  nlohmann::json active = JsonIn(Cli("jobs -o json --state pending,running", kAliceToken, &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(active["total"], 2) << active.dump();
  EXPECT_EQ(JsonIn(Cli("jobs -o json -t PD,R"))["total"], 2);
  EXPECT_EQ(JsonIn(Cli("jobs -o json --name quick"))["jobs"][0]["id"], done);
  EXPECT_EQ(JsonIn(Cli("jobs -o json -n big,next"))["total"], 2);
  std::string table = Cli("jobs --state pending");
  EXPECT_NE(table.find("none free now"), std::string::npos) << "the queue's reason, as squeue's: " << table;
  EXPECT_NE(table.find("starts in"), std::string::npos) << table;
  std::string bad = Cli("jobs --state pending,sleeping", kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(bad.find("unknown state 'sleeping'"), std::string::npos) << bad;
  // The logs of a job that has not started: said, not an empty success.
  std::string logs = Cli("logs " + next, kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << logs;
  EXPECT_NE(logs.find("is pending: it has no output yet"), std::string::npos) << logs;
}

TEST_F(CliFrictions, ArrayTasksAreSpokenOfByTheirArrayIds) {
  int rc = 0;
  std::string array = JsonIn(Cli("submit -o json -J sweep --array 0-5 -g 4 -t A100-80GB -- sleep 60"))["id"];
  ASSERT_EQ(WaitFor(array, "running"), "running");  // task 0 runs; 1..5 wait for its GPUs
  std::string job = Cli("job " + array + "_2");
  EXPECT_EQ(job.rfind("job " + array + "_2 (sweep)", 0), 0u) << job;
  std::string explain = Cli("queue --explain " + array);
  EXPECT_NE(explain.find("array " + array + ": 5 task(s) waiting"), std::string::npos) << explain;
  EXPECT_NE(explain.find("  " + array + "_1: position 1"), std::string::npos) << explain;
  // A task changes by its id like any job (its array's variables are Gantry's own).
  std::string update = Cli("update " + array + "_3 -p high --estimate 1m", kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << update;
  EXPECT_EQ(update, "job " + array + "_3 (pending): estimate 1m00s, priority high\n");
  std::string cancel = Cli("cancel " + array + "_2", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << cancel;
  EXPECT_EQ(cancel, "job " + array + "_2: cancelled\n");
  // Slurm's task lists, and the whole array by its id: what each did.
  cancel = Cli("cancel '" + array + "_[4-5]'", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << cancel;
  EXPECT_EQ(cancel, "array " + array + "_[4-5]: cancelled 2 of 2 tasks (those not ended); now 2 cancelled\n");
  std::string held = Cli("hold " + array, kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << held;
  EXPECT_EQ(held.rfind("array " + array + ": held 2 of 6 tasks (only pending tasks are held); now ", 0), 0u) << held;
  std::string shown = Cli("job " + array);
  EXPECT_EQ(shown.rfind("array " + array + ": 6 tasks " + array + "_[0-5]: ", 0), 0u) << shown;
  EXPECT_NE(shown.find("\njob " + array + "_0 (sweep)"), std::string::npos) << shown;
  std::string explain_held = Cli("queue --explain " + array);
  EXPECT_NE(explain_held.find("array " + array + ": 0 task(s) waiting, 2 kept out of the queue"), std::string::npos)
      << explain_held;
  EXPECT_NE(explain_held.find("  " + array + "_[1,3]: held ("), std::string::npos) << explain_held;
  cancel = Cli("cancel " + array, kAliceToken, &rc);
  EXPECT_EQ(cancel.rfind("array " + array + ": cancelled 3 of 6 tasks (those not ended); now ", 0), 0u) << cancel;
  // The task that ran (and was billed) keeps a row of its own among those that never started.
  ASSERT_EQ(WaitFor(array, "cancelled"), "cancelled");
  std::string jobs = Cli("jobs --state cancelled");
  EXPECT_NE(jobs.find("\n" + array + "_0 "), std::string::npos) << jobs;
}

TEST_F(CliFrictions, UpdateSaysWhatChangedAndJobShowsWhatItWasGiven) {
  int rc = 0;
  std::string big = JsonIn(Cli("submit -o json -g 4 -t A100-80GB -- sleep 60"))["id"];
  ASSERT_EQ(WaitFor(big, "running"), "running");
  std::string id =
      JsonIn(Cli("submit -o json -g 4 -t A100-80GB --container-image docker.io/library/busybox "
                 "--notify end,fail --mail-user ana@example.org -- true"))["id"];
  std::string update = Cli("update " + id + " --time-limit 90 -p high", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << update;
  EXPECT_EQ(update, "job " + id + " (pending): priority high, time limit 1h30m\n");
  std::string job = Cli("job " + id);
  EXPECT_NE(job.find("  container  docker.io/library/busybox\n"), std::string::npos) << job;
  EXPECT_NE(job.find("  time limit 1h30m\n"), std::string::npos) << "as scontrol show job's TimeLimit: " << job;
  EXPECT_NE(job.find("  workdir    /"), std::string::npos) << "the submit directory: " << job;
  EXPECT_NE(job.find("  notify     end,fail to ana@example.org\n"), std::string::npos) << job;
  EXPECT_NE(job.find("priority=high"), std::string::npos) << "history as key=value: " << job;
  EXPECT_EQ(job.find("{\""), std::string::npos) << "no raw JSON in the history: " << job;
}

// sbatch's habit: `gantry submit train.sh` with the script here. The job cannot find it on
// PATH: the submit says so at once, and `gantry logs` of the failed job shows its stderr
// instead of an empty answer.
TEST_F(CliFrictions, AScriptWithoutDotSlashIsHintedAndItsErrorShown) {
  std::string dir = TempPath("script-here");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/train.sh") << "#!/bin/sh\necho training\n";
  std::string out;
  RunCommand(
      fmt::format("cd {} && GANTRY_SERVER={} GANTRY_TOKEN={} {} submit -g 1 -t T4 --estimate 1m -- train.sh 2>&1", dir,
                  server_->address(), kAliceToken, GANTRY_BINARY),
      &out);
  EXPECT_NE(out.find("hint: train.sh is a file here but no command on PATH"), std::string::npos) << out;
  EXPECT_NE(out.find("give ./train.sh"), std::string::npos) << out;
  std::string id = JobIdIn(out);
  ASSERT_EQ(WaitFor(id, "failed"), "failed");
  int rc = 0;
  std::string logs = Cli("logs " + id, kAliceToken, &rc);
  EXPECT_NE(logs.find("failed with nothing on stdout; the end of its stderr"), std::string::npos) << logs;
  EXPECT_NE(logs.find("train.sh: not found"), std::string::npos) << logs;
}

TEST_F(CliFrictions, ASlurmScriptsSbatchLinesAreSaidToBeUnread) {
  std::string dir = TempPath("sbatch-lines");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/train.sh") << "#!/bin/sh\n#SBATCH --gres=gpu:2\n#SBATCH -t 2:00:00\necho training\n"
                                   << "#SBATCH --late-one-is-not-a-directive\n";
  std::string out;
  RunCommand(fmt::format("cd {} && GANTRY_SERVER={} GANTRY_TOKEN={} {} submit -g 1 -t T4 --estimate 1m -- sh "
                         "train.sh 2>&1",
                         dir, server_->address(), kAliceToken, GANTRY_BINARY),
             &out);
  EXPECT_NE(out.find("hint: gantry does not read train.sh's #SBATCH lines (2): give them as gantry submit flags"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("e.g. #SBATCH --gres=gpu:2\n"), std::string::npos) << out;
  EXPECT_EQ(WaitFor(JobIdIn(out), "succeeded"), "succeeded") << "the job itself runs: " << out;
}

}  // namespace
}  // namespace gantry::testing
