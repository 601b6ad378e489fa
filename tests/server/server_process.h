// Starts the real `gantry server --standalone` on a loopback port for integration tests,
// with a users.yaml of four callers, and talks HTTP to it.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/read_file.h"
#include "state/auth.h"

namespace gantry::testing {

// cpp-httplib's client writes without MSG_NOSIGNAL: a server that answers early and closes
// must not kill the test process with SIGPIPE.
inline const bool kSigpipeIgnored = (signal(SIGPIPE, SIG_IGN), true);

// The ports a test's node lends its jobs: a range of 50 of its own for each test process,
// server started in it (slot 0; its agents: 1-3 of the same), so jobs with ports in tests
// that run side by side, or one after another while the last one's jobs die, do not meet.
inline int g_test_servers = 0;  // servers started by this process (counted before each forks)
inline std::string TestPortRange(int slot) {
  int first = 10000 + static_cast<int>((getpid() + g_test_servers) % 50) * 200 + slot * 50;
  return std::to_string(first) + "-" + std::to_string(first + 49);
}

// Tokens of the users.yaml the test server reads.
inline const char* kAliceToken = "alice-token-vision-user";
inline const char* kBobToken = "bob-token-nlp-user";
inline const char* kLeadToken = "lead-token-vision-team-admin";
inline const char* kCarolToken = "carol-token-vision-user";  // alice's teammate
inline const char* kRootToken = "root-token-ops-admin";
inline const char* kAgentToken = "agent-token-node-a";  // bound to node-a
// An agent token bound to `node` (users.yaml has one for node-a, node-b and node-m).
inline std::string AgentToken(const std::string& node) { return "agent-token-" + node; }

// Team policies of the test server: vision and nlp may use every class and run as
// `nobody` where the node has no account of their own; ops (the admins) may run as root.
inline const char* kTestTeams =
    "teams:\n"
    "  vision: {priorities: [critical, high, medium, low], non_preemptible: true, unix_account: nobody}\n"
    "  nlp: {priorities: [critical, high, medium, low], non_preemptible: true, unix_account: nobody}\n"
    "  ops: {allow_root: true}\n";

class ServerProcess {
 public:
  // `dir` holds config/, data/ and the server's log; the same dir restarts the same server.
  // Standalone with `fake_gpus`, or with the GPUs it detects for "detect"; with an empty
  // `fake_gpus`, a cluster server that waits for agents (nodes lost after 1.5 s of silence,
  // unless AddArgs gives --node-timeout; --db and --listen there replace its own SQLite
  // file and port 0).
  explicit ServerProcess(std::string dir, std::string fake_gpus = "1x4xA100-80GB,1x2xT4")
      : dir_(std::move(dir)), fake_gpus_(std::move(fake_gpus)) {
    std::filesystem::create_directories(dir_ + "/config");
    std::ofstream(dir_ + "/sendmail") << "#!/bin/sh\ncat >> '" << dir_ << "/mail.txt'\n";
    std::filesystem::permissions(dir_ + "/sendmail",
                                 std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                     std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                     std::filesystem::perms::others_exec);
    // Readings every 200 ms, so telemetry tests need not wait the default 5 s.
    std::ofstream(dir_ + "/config/health.yaml") << "drain_xids: [48, 62, 64, 74, 79, 95]\n"
                                                << "app_xids: [13, 31, 43, 45, 68, 94, 63, 92]\n"
                                                << "telemetry_interval: 200ms\n";
    WriteUsers(kTestTeams);
  }
  // users.yaml: the six callers, an agent per test node, and `teams` (before Start).
  void WriteUsers(const std::string& teams) {
    std::ofstream users(dir_ + "/config/users.yaml");
    users << teams << "users:\n";
    const char* rows[][4] = {{"alice", "vision", "user", kAliceToken},
                             {"carol", "vision", "user", kCarolToken},
                             {"bob", "nlp", "user", kBobToken},
                             {"lead", "vision", "team-admin", kLeadToken},
                             {"root", "ops", "admin", kRootToken}};
    for (auto& r : rows) {
      users << "  - {name: " << r[0] << ", team: " << r[1] << ", role: " << r[2]
            << ", token_sha256: " << Sha256Hex(r[3]) << "}\n";
    }
    for (const char* node : {"node-a", "node-b", "node-m"}) {
      users << "  - {name: agent-" << node << ", team: ops, role: agent, node: " << node
            << ", token_sha256: " << Sha256Hex(AgentToken(node)) << "}\n";
    }
  }
  ~ServerProcess() {
    Kill(SIGTERM);
    KillJobs();
  }

  // Jobs outlive a standalone server by design; a test ends them: each job shim leads its
  // process group and names a file under the data dir on its command line.
  void KillJobs() {
    std::error_code ec;
    for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
      std::string cmdline = ReadFileNoThrow(p.path() / "cmdline").value_or("");  // the process may be gone
      if (cmdline.find("job-shim") == std::string::npos || cmdline.find(dir_) == std::string::npos) continue;
      pid_t pid = static_cast<pid_t>(std::atoi(p.path().filename().c_str()));
      if (pid > 0) kill(-pid, SIGKILL);
    }
  }

  void Start() {
    Launch();
    WaitReady();
  }
  // Starts the process without waiting (a standby writes its ready file only once it leads).
  void Launch() {
    std::string ready = dir_ + "/ready";
    std::filesystem::remove(ready);
    address_.clear();
    const std::string ports = TestPortRange(0);
    ++g_test_servers;
    pid_ = fork();
    if (pid_ == 0) {
      std::string log = dir_ + "/server.log";
      if (!freopen(log.c_str(), "a", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(127);
      std::vector<std::string> args = {GANTRY_BINARY, "server",         "--data-dir",   dir_ + "/data",
                                       "--config",    dir_ + "/config", "--ready-file", ready};
      args.insert(args.end(), extra_args_.begin(), extra_args_.end());
      auto given = [&](const char* flag) {
        return std::find(extra_args_.begin(), extra_args_.end(), flag) != extra_args_.end();
      };
      if (!given("--listen")) args.insert(args.end(), {"--listen", "127.0.0.1:0"});
      // A mail transport that keeps each message in the directory (mail.txt).
      if (!given("--sendmail")) args.insert(args.end(), {"--sendmail", dir_ + "/sendmail"});
      if (fake_gpus_.empty()) {
        if (!given("--db")) args.insert(args.end(), {"--db", dir_ + "/cluster.db"});
        if (!given("--node-timeout")) args.insert(args.end(), {"--node-timeout", "1.5"});
      } else if (fake_gpus_ == "detect") {
        args.insert(args.end(), {"--standalone"});  // this machine's GPUs (NVML, nvidia-smi)
      } else {
        args.insert(args.end(), {"--standalone", "--fake-gpus", fake_gpus_});
      }
      if (fake_gpus_ != "" && !given("--ports")) args.insert(args.end(), {"--ports", ports});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  // Waits up to `seconds` for the ready file and reads the address from it.
  void WaitReady(int seconds = 10) {
    std::string ready = dir_ + "/ready";
    for (int i = 0; i < seconds * 100 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(ready);
    in >> address_;
    ASSERT_FALSE(address_.empty()) << "the server did not start; see " << dir_ << "/server.log";
  }
  // Sends `sig` and waits for the process to end.
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Sends SIGTERM and waits up to `seconds` for the process to end; false (and SIGKILL)
  // when it did not.
  bool TerminateWithin(int seconds) {
    Signal(SIGTERM);
    return ExitsWithin(seconds);
  }
  // Sends `sig` and returns at once (SIGSTOP, SIGCONT).
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Whether the process ends by itself within `seconds` (else it is killed).
  bool ExitsWithin(int seconds) {
    if (pid_ <= 0) return true;
    bool ended = false;
    for (int i = 0; i < seconds * 100 && !ended; ++i) {
      ended = waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!ended) Kill(SIGKILL);
    pid_ = -1;
    return ended;
  }

  // More `gantry server` flags for the next Start.
  void AddArgs(const std::vector<std::string>& args) {
    extra_args_.insert(extra_args_.end(), args.begin(), args.end());
  }
  const std::string& address() const { return address_; }
  std::string data_dir() const { return dir_ + "/data"; }
  const std::string& dir() const { return dir_; }

  httplib::Client Client(const char* token) const {
    httplib::Client c(address_);
    if (token) c.set_bearer_token_auth(token);
    c.set_keep_alive(true);
    c.set_tcp_nodelay(true);
    c.set_read_timeout(10);
    return c;
  }

 private:
  std::string dir_;
  std::string fake_gpus_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  std::string address_;
};

// A `gantry agent` process with fake GPUs, reporting every 0.3 s.
class AgentProcess {
 public:
  AgentProcess(std::string dir, std::string node_id, std::string fake_gpus, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), node_(std::move(node_id)), gpus_(std::move(fake_gpus)), extra_(std::move(extra)) {}
  ~AgentProcess() { Kill(SIGKILL); }
  void Start(const std::string& server) {
    const std::string ports = TestPortRange(node_ == "node-a" ? 1 : node_ == "node-b" ? 2 : 3);
    pid_ = fork();
    if (pid_ == 0) {
      std::string log = dir_ + "/agent-" + node_ + ".log";
      if (!freopen(log.c_str(), "a", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(127);
      std::vector<std::string> args = {GANTRY_BINARY, "agent",         "--server",    server,
                                       "--node-id",   node_,           "--data-dir",  dir_ + "/agent-" + node_,
                                       "--fake-gpus", gpus_,           "--heartbeat", "0.3",
                                       "--config",    dir_ + "/config"};
      // The node's token from users.yaml, unless the test gives a --token-file of its own.
      if (std::find(extra_.begin(), extra_.end(), "--token-file") == extra_.end()) {
        args.insert(args.end(), {"--token", AgentToken(node_)});
      }
      if (std::find(extra_.begin(), extra_.end(), "--ports") == extra_.end()) {
        args.insert(args.end(), {"--ports", ports});
      }
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::string dir_, node_, gpus_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

inline nlohmann::json Json(const httplib::Result& r) {
  return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
}

}  // namespace gantry::testing
