// Interactive work against the real standalone server (fake GPUs, the in-process agent) and
// through a remote agent: gantry exec runs in the job's allocation with its environment and
// exit status, on a terminal that follows the user's window and Ctrl-C; attach follows the
// output live; gantry shell allocates, opens the shell and gives the GPUs back with it; a
// lost connection hangs up the session's command but not the job.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "session_util.h"

namespace gantry::testing {
namespace {

class Interactive : public ServerTest {
 protected:
  // A T4 held for interactive use (no command), running.
  std::string HeldGpu() {
    std::string id = JsonIn(Cli("submit -o json -g 1 -t T4 --hold-gpus 10m"))["id"];
    EXPECT_EQ(WaitFor(id, "running"), "running");
    return id;
  }
  std::unique_ptr<ByteStream> Open(const std::string& path, const char* token = kAliceToken) {
    auto s = OpenSession(server_->address(), token, path);
    EXPECT_TRUE(s) << s.status().ToString();
    return s ? std::move(*s) : nullptr;
  }
};

TEST_F(Interactive, ExecRunsInTheJobsAllocationWithItsEnvironmentAndExitStatus) {
  std::string id = HeldGpu();
  int rc = 0;
  std::string out =
      Cli("exec " + id + " -- sh -c 'echo dev=$CUDA_VISIBLE_DEVICES job=$GANTRY_JOB_ID; echo oops >&2; exit 3'",
          kAliceToken, &rc);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("dev=GPU-fake-t4-"), std::string::npos) << out;
  EXPECT_NE(out.find("job=" + id + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("oops\n"), std::string::npos) << out;
  // Each word arrives as typed, repeats and spaces included.
  EXPECT_EQ(Cli("exec " + id + " -- printf '[%s]' x x 'a b' ''"), "[x][x][a b][]");
  // Input reaches the command, and its end is an end-of-file.
  std::string cat = Cli("exec " + id + " -- tr a-z A-Z < /etc/hostname", kAliceToken, &rc);
  EXPECT_EQ(rc, 0) << cat;
  std::string host = ReadFileNoThrow("/etc/hostname").value_or("");
  for (char& c : host) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(cat, host);
  // The session is audited with its command.
  std::string audit = Cli("audit --limit 20", kRootToken);
  EXPECT_NE(audit.find("session exec"), std::string::npos) << audit;
  EXPECT_NE(audit.find("tr a-z A-Z"), std::string::npos) << audit;
}

TEST_F(Interactive, ATerminalFollowsTheWindowAndCtrlCReachesTheCommand) {
  std::string id = HeldGpu();
  auto s = Open(ExecPath(id,
                         {"sh", "-c",
                          "stty size; read x; stty size; trap 'echo got-int; exit 7' INT; "
                          "echo ready; while :; do sleep 0.1; done"},  // the trap is set before Ctrl-C can come
                         true, "&cols=100&rows=40"));
  ASSERT_TRUE(s);
  SessionSeen seen;
  ASSERT_TRUE(
      ReadFrames(*s, seen, 10000, [](const SessionSeen& x) { return x.out.find("40 100") != std::string::npos; }))
      << seen.out << seen.error;
  ASSERT_TRUE(SendFrame(*s, FrameType::kResize, "120 50"));
  ASSERT_TRUE(SendFrame(*s, FrameType::kStdin, "go\r"));
  ASSERT_TRUE(ReadFrames(*s, seen, 10000, [](const SessionSeen& x) {
    return x.out.find("ready") != std::string::npos;
  })) << seen.out;
  EXPECT_NE(seen.out.find("50 120"), std::string::npos) << seen.out;
  ASSERT_TRUE(SendFrame(*s, FrameType::kStdin, "\x03"));  // Ctrl-C, as a terminal sends it
  ASSERT_TRUE(ReadFrames(*s, seen, 10000));
  EXPECT_NE(seen.out.find("got-int"), std::string::npos) << seen.out;
  EXPECT_EQ(seen.exit, 7);
  EXPECT_EQ(WaitFor(id, "running"), "running") << "the job goes on";
}

TEST_F(Interactive, WithoutATerminalASignalFrameReachesTheCommand) {
  std::string id = HeldGpu();
  auto s = Open(ExecPath(id, {"sh", "-c", "trap 'echo got-int; exit 9' INT; echo ready; while :; do sleep 0.1; done"}));
  ASSERT_TRUE(s);
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(*s, seen, 10000, [](const SessionSeen& x) { return x.out == "ready\n"; })) << seen.out;
  ASSERT_TRUE(SendFrame(*s, FrameType::kSignal, "INT"));
  ASSERT_TRUE(ReadFrames(*s, seen, 10000));
  EXPECT_EQ(seen.out, "ready\ngot-int\n");
  EXPECT_EQ(seen.exit, 9);
}

TEST_F(Interactive, ALostConnectionHangsUpTheCommandNotTheJob) {
  std::string id = HeldGpu();
  std::string mark = fmt::format("/tmp/gantry-hup-mark-{}", getpid());  // the job's account (nobody) writes it
  std::filesystem::remove(mark);
  auto s = Open(ExecPath(
      id, {"sh", "-c", "trap 'echo hup > " + mark + "; exit 1' HUP; echo ready; while :; do sleep 0.1; done"}));
  ASSERT_TRUE(s);
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(*s, seen, 10000, [](const SessionSeen& x) { return x.out == "ready\n"; })) << seen.out;
  s.reset();  // the user's connection drops
  for (int i = 0; i < 100 && !std::filesystem::exists(mark); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(std::filesystem::exists(mark)) << "the command was hung up";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(WaitFor(id, "running"), "running") << "an exec's end is not its job's";
}

TEST_F(Interactive, WhatASessionStartsEndsWithItAndASessionEndsWithItsJob) {
  std::string id = HeldGpu();
  // A background process of the command ends with the session, as a Slurm step's do.
  std::string pidfile = fmt::format("/tmp/gantry-bg-pid-{}", getpid());
  std::filesystem::remove(pidfile);
  int rc = 0;
  Cli("exec " + id + " -- sh -c 'sleep 300 & echo $! > " + pidfile + "'", kAliceToken, &rc);
  EXPECT_EQ(rc, 0);
  int bg = std::atoi(ReadFileNoThrow(pidfile).value_or("0").c_str());
  ASSERT_GT(bg, 0);
  for (int i = 0; i < 50 && kill(bg, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(kill(bg, 0), 0) << "the background sleep outlived its session";
  std::filesystem::remove(pidfile);
  // The job ends (cancelled): its open session is told and ends too, with its command.
  auto s = Open(ExecPath(id, {"sh", "-c", "echo ready; while :; do sleep 0.1; done"}));
  ASSERT_TRUE(s);
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(*s, seen, 10000, [](const SessionSeen& x) { return x.out == "ready\n"; })) << seen.out;
  Cli("cancel " + id);
  ASSERT_TRUE(ReadFrames(*s, seen, 15000)) << seen.out << seen.error;
  EXPECT_NE(seen.error.find("ended with its job's run"), std::string::npos) << seen.error;
  EXPECT_NE(seen.exit, -999);
}

TEST_F(Interactive, AttachFollowsTheOutputLiveAndEndsWithTheJob) {
  std::string mark = TempPath("attach-go");
  std::filesystem::remove(mark);
  std::string id =
      JsonIn(Cli("submit -o json -g 1 -t T4 -- sh -c 'while [ ! -e " + mark +
                 " ]; do sleep 0.05; done; for i in 1 2 3; do echo tick $i; sleep 0.2; done; echo bad >&2; "
                 "exit 5'"))["id"];
  ASSERT_EQ(WaitFor(id, "running"), "running");
  auto s = Open("/v1/jobs/" + id + "/attach");
  ASSERT_TRUE(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::ofstream(mark) << "go\n";
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(*s, seen, 15000)) << seen.out << seen.error;
  EXPECT_EQ(seen.out, "tick 1\ntick 2\ntick 3\n");
  EXPECT_EQ(seen.err, "bad\n");
  EXPECT_EQ(seen.exit, 5);
  // The CLI's attach exits with the job's status too; a job without a command has nothing to follow.
  std::string held = HeldGpu();
  int rc = 0;
  std::string out = Cli("attach " + held, kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("holds GPUs and runs no command"), std::string::npos) << out;
}

TEST_F(Interactive, ShellAllocatesRunsTheShellAndGivesTheGpusBackWithIt) {
  int rc = 0;
  std::string script = TempPath("shell-input");
  std::ofstream(script) << "echo inside $GANTRY_JOB_ID $CUDA_VISIBLE_DEVICES\nexit 4\n";
  std::string out = Cli("shell -g 1 -t T4 < " + script, kAliceToken, &rc);
  EXPECT_EQ(rc, 4) << out;
  std::string id = JobIdIn(out);
  EXPECT_NE(out.find("inside " + id + " GPU-fake-t4-"), std::string::npos) << out;
  EXPECT_NE(out.find("released its GPUs (failed)"), std::string::npos) << out;
  // The job ends as its shell did, as salloc's does.
  EXPECT_EQ(WaitFor(id, "failed"), "failed");
  EXPECT_EQ(Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id)).value("exit_code", -1), 4);
  EXPECT_EQ(JsonIn(Cli("jobs -o json --state running"))["total"], 0) << "nothing holds the GPUs after the shell";
  // A plain hold says how to use what it holds.
  std::string held = Cli("submit -g 1 -t T4 --hold-gpus 5m");
  std::string held_id = JobIdIn(held);
  std::string logs = Cli("logs -f " + held_id, kAliceToken, &rc);  // not a wait for output that never comes
  EXPECT_EQ(rc, 1);
  EXPECT_NE(logs.find("holds GPUs and runs no command: it has no output"), std::string::npos) << logs;
  EXPECT_NE(held.find("hint: job " + held_id + " holds its GPUs: gantry exec " + held_id + " opens a shell on them"),
            std::string::npos)
      << held;
}

TEST_F(Interactive, ExecNeedsARunningJobAndSaysSo) {
  std::string big = JsonIn(Cli("submit -o json -g 2 -t T4 --hold-gpus 10m"))["id"];
  ASSERT_EQ(WaitFor(big, "running"), "running");
  std::string waiting = JsonIn(Cli("submit -o json -g 2 -t T4 --hold-gpus 10m"))["id"];
  int rc = 0;
  std::string out = Cli("exec " + waiting + " -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("job " + waiting + " is pending: a session needs a running job"), std::string::npos) << out;
  out = Cli("exec 9999 -- true", kAliceToken, &rc);
  EXPECT_NE(out.find("no job 9999"), std::string::npos) << out;
}

// What a newcomer hit first: a command that is not there, no input, leaked descriptors, an
// array's id, an ended job, Slurm's words and a command without --.
TEST_F(Interactive, ANewcomersFirstSessionsSayWhatWentWrong) {
  std::string id = HeldGpu();
  int rc = 0;
  std::string missing = Cli("exec " + id + " -- nosuchcmd", kAliceToken, &rc);
  EXPECT_EQ(rc, 127);
  EXPECT_NE(missing.find("gantry: cannot run nosuchcmd: No such file or directory"), std::string::npos) << missing;
  // The command gets its input, output and error, and nothing of the server's.
  EXPECT_EQ(Cli("exec " + id + " -- sh -c 'ls /proc/$$/fd'"), "0\n1\n2\n");
  EXPECT_EQ(Cli("exec " + id + " --no-stdin -- cat", kAliceToken, &rc), "");
  EXPECT_EQ(rc, 0);
  std::string array = JsonIn(Cli("submit -o json --array 0-2 -g 1 -t A100-80GB --hold-gpus 5m"))["id"];
  std::string named = Cli("exec " + array + " -- true", kAliceToken, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(named,
            "gantry: " + array + " is an array of 3 tasks: name one, as " + array + "_0 (gantry jobs lists them)\n");
  std::string done = JsonIn(Cli("submit -o json -g 1 -t T4 -- true"))["id"];
  ASSERT_EQ(WaitFor(done, "succeeded"), "succeeded");
  EXPECT_EQ(Cli("attach " + done),
            "gantry: job " + done + " has ended (succeeded): gantry logs " + done + " has its output\n");
  std::string srun = Cli("srun --pty bash", kAliceToken, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(srun.find("srun --pty bash is gantry shell -g 1"), std::string::npos) << srun;
  std::string words = Cli("exec " + id + " hostname -f", kAliceToken, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(words.find("hint: the command goes after --: gantry exec ID [options] -- CMD ARGS"), std::string::npos)
      << words;
}

// The same through a remote agent, which connects back to the server for each session.
class RemoteInteractive : public RemoteAgentTest {};

TEST_F(RemoteInteractive, ExecGoesThroughTheServerToTheAgent) {
  auto alice = server_->Client(kAliceToken);
  std::string id = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "hold_gpus": "10m"})", "application/json"))["id"];
  for (int i = 0; i < 500 && Json(alice.Get("/v1/jobs/" + id))["state"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto s = OpenSession(server_->address(), kAliceToken, ExecPath(id, {"sh", "-c", "read x; echo got $x; exit 6"}));
  ASSERT_TRUE(s) << s.status().ToString();
  ASSERT_TRUE(SendFrame(**s, FrameType::kStdin, "hello\n"));
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(**s, seen, 20000)) << seen.out << seen.error;
  EXPECT_EQ(seen.out, "got hello\n");
  EXPECT_EQ(seen.exit, 6);
}

}  // namespace
}  // namespace gantry::testing
