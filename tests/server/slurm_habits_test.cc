// A Slurm user's habits at `gantry submit`, against the real server (4 A100-80GB and 2 T4):
// Slurm's short flags that do not clash work (-N, -J, -G, -H), those that mean something
// else here (-t, -p) answer with our flag, Slurm flags we spell otherwise get a hint, an
// unknown GPU type lists this cluster's types, and --time-limit 0 is the longest allowed.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_fixture.h"

namespace gantry::testing {
namespace {

using SlurmHabits = ServerTest;

TEST_F(SlurmHabits, ShortFlagsThatDoNotClashWork) {
  int rc = 0;
  std::string out = Cli("submit --dry-run -o json -J train -G 2 -t T4 --estimate 5m -- true", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json spec = JsonIn(out)["jobs"][0]["spec"];
  EXPECT_EQ(spec["name"], "train") << out;
  EXPECT_EQ(spec["gpus"], 2);
  // -N is --nodes: this cluster has one node of each type, so two are refused, by nodes.
  out = Cli("submit --dry-run -o json -N 2 -G 2 -t T4 -- true", kAliceToken, &rc);
  nlohmann::json verdict = JsonIn(out)["jobs"][0];
  EXPECT_EQ(verdict["error"]["field"], "nodes") << out;
  EXPECT_NE(verdict["error"]["message"].get<std::string>().find("2 nodes"), std::string::npos) << out;
}

TEST_F(SlurmHabits, ATimeGivenToDashTNamesTimeLimit) {
  int rc = 0;
  std::string out = Cli("submit -t 2:00:00 -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("'2:00:00' is a time, not a GPU type: -t is --gpu-type here; for Slurm's -t (a time limit) "
                     "give --time-limit 2:00:00"),
            std::string::npos)
      << out;
  EXPECT_EQ(JsonIn(Cli("jobs -o json"))["total"], 0) << "nothing was submitted";
}

TEST_F(SlurmHabits, APartitionGivenToDashPNamesNodeSelector) {
  int rc = 0;
  std::string out = Cli("submit -p gpu -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("unknown priority class 'gpu'"), std::string::npos) << out;
  EXPECT_NE(out.find("hint: -p is the priority class here (Slurm's --qos); if 'gpu' is a Slurm partition, "
                     "partitions are node labels: --node-selector pool=gpu"),
            std::string::npos)
      << out;
  // A class that exists but the team may not use is not mistaken for a partition.
  std::string dir = TempPath("classes");
  std::filesystem::remove_all(dir);
  ServerProcess narrow(dir);
  narrow.WriteUsers("teams:\n  vision: {priorities: [medium, low], unix_account: nobody}\n");
  narrow.Start();
  out.clear();
  RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} submit -p high -g 1 -- true 2>&1", narrow.address(),
                         kAliceToken, GANTRY_BINARY),
             &out);
  EXPECT_NE(out.find("priority classes medium, low"), std::string::npos) << out;
  EXPECT_EQ(out.find("partition"), std::string::npos) << out;
}

TEST_F(SlurmHabits, SlurmFlagsSpelledOtherwiseGetAHint) {
  int rc = 0;
  std::string out = Cli("submit --gres=gpu:a100:4 -c 8 --mem 64G -- true", kAliceToken, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("hint: Slurm's --gres: GPUs are -g COUNT and -t TYPE"), std::string::npos) << out;
  EXPECT_NE(out.find("hint: Slurm's -c: CPUs are --cpus (per node)"), std::string::npos) << out;
  EXPECT_NE(out.find("hint: Slurm's --mem: host memory is --memory-gb (per node)"), std::string::npos) << out;
  // What comes after -- is the job's own, never a hint.
  out = Cli("submit -g 1 --gres x -- sbatch -c 8", kAliceToken, &rc);
  EXPECT_EQ(out.find("Slurm's -c"), std::string::npos) << out;
}

TEST_F(SlurmHabits, AnUnknownGpuTypeListsThisClustersTypes) {
  int rc = 0;
  std::string out = Cli("submit -t a100 -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("unknown GPU type 'a100' (did you mean A100-80GB?); this cluster has A100-80GB, T4"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("H200"), std::string::npos) << "only the types this cluster has: " << out;
}

TEST_F(SlurmHabits, TimeLimitZeroIsTheLongestAllowedAndANegativeOneSaysSo) {
  int rc = 0;
  std::string out = Cli("submit -o json -g 1 --time-limit 0 -- sleep 30", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string id = JsonIn(out)["id"];
  nlohmann::json job = JsonIn(Cli("job -o json " + id));
  EXPECT_EQ(job["spec"]["time_limit_s"], 14 * 24 * 3600) << job["spec"].dump();  // scheduler.yaml's max
  out = Cli("submit -g 1 --time-limit unlimited -o json -- true", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  out = Cli("submit -g 1 --time-limit -5 -- true", kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("a duration cannot be negative"), std::string::npos) << out;
}

TEST_F(SlurmHabits, HoldSubmitsHeldUntilReleased) {
  int rc = 0;
  std::string out = Cli("submit -o json -H -g 1 -- true", kAliceToken, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string id = JsonIn(out)["id"];
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  nlohmann::json job = JsonIn(Cli("job -o json " + id));
  EXPECT_EQ(job["state"], "pending") << job.dump();
  EXPECT_EQ(job["held"], "user") << job.dump();
  // Held says so where a Slurm user looks: gantry jobs and gantry job.
  EXPECT_NE(Cli("jobs --state pending").find("held (gantry release " + id + ")"), std::string::npos);
  EXPECT_NE(Cli("job " + id).find("state      pending: held (gantry release " + id + ")"), std::string::npos)
      << Cli("job " + id);
  // An array submitted held holds every task.
  std::string array = JsonIn(Cli("submit -o json --hold --array 0-2 -g 1 -- true", kAliceToken, &rc))["id"];
  EXPECT_EQ(JsonIn(Cli("job -o json " + array + "_2"))["held"], "user");
  Cli("release " + id, kAliceToken, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(WaitFor(id, "succeeded"), "succeeded");
}

TEST_F(SlurmHabits, MailThisServerCannotSendIsRefusedAtSubmit) {
  std::string dir = TempPath("no-mail");
  std::filesystem::remove_all(dir);
  ServerProcess plain(dir);
  plain.AddArgs({"--sendmail", dir + "/no-such-sendmail"});
  plain.Start();
  std::string out;
  int rc = RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} submit -g 1 --mail-type END,FAIL --mail-user "
                                  "ana@example.org -- true 2>&1",
                                  plain.address(), kAliceToken, GANTRY_BINARY),
                      &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("mail_user: this server sends no mail"), std::string::npos) << out;
  EXPECT_NE(out.find("--webhook"), std::string::npos) << out;
  // This fixture's server has a mail transport: the same submit goes in, and its end is mailed.
  std::string id = JsonIn(Cli("submit -o json -g 1 --mail-type END --mail-user ana@example.org -- true"))["id"];
  ASSERT_EQ(WaitFor(id, "succeeded"), "succeeded");
}

}  // namespace
}  // namespace gantry::testing
