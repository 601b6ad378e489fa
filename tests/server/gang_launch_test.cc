// Integration: multi-node launch on two real `gantry agent` processes on loopback. Each rank
// gets MASTER_ADDR/MASTER_PORT (a port rank 0's node lent), WORLD_SIZE, NODE_RANK and
// NPROC_PER_NODE, and the ranks meet there over TCP as torchrun's rendezvous would; each
// rank's and each run's output is kept apart; a named port is reachable at its URL.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "command_util.h"
#include "controller_harness.h"
#include "server_process.h"

namespace gantry::testing {
namespace {

// Rank 0 listens on MASTER_ADDR:MASTER_PORT for the other ranks; each says hello and hears
// back who it met. Every rank prints what the launcher gave it.
constexpr const char* kRendezvous = R"(import os, socket, sys, time
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print(f"rank {rank} of {world} nproc {os.environ['NPROC_PER_NODE']} master {addr}", flush=True)
if rank == 0:
    srv = socket.create_server((addr, port))
    srv.settimeout(60)
    for _ in range(world - 1):
        conn, _ = srv.accept()
        peer = conn.recv(64).decode()
        conn.sendall(b"welcome")
        print(f"rank 0 met {peer}", flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline: sys.exit(2)
            time.sleep(0.2)
    conn.sendall(f"rank {rank}".encode())
    print(f"rank {rank} heard {conn.recv(64).decode()}", flush=True)
)";

class GangLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("gang");
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    // Jobs run as `nobody` on a root agent: they read the script from this directory.
    std::filesystem::permissions(dir_, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    std::ofstream(dir_ + "/rendezvous.py") << kRendezvous;
    server_->Start();
    // Tests run side by side: each its own ports, or one's listener fails another's start.
    int first = 10000 + static_cast<int>(getpid() % 490) * 20;  // below the default range and ephemeral ports
    for (const char* node : {"node-a", "node-b"}) {
      agents_.push_back(std::make_unique<AgentProcess>(
          dir_, node, "4xT4",
          std::vector<std::string>{"--address", "127.0.0.1", "--ports", fmt::format("{}-{}", first, first + 9)}));
      agents_.back()->Start(server_->address());
      first += 10;
    }
    for (const char* node : {"node-a", "node-b"}) ASSERT_EQ(Wait([&] { return NodeState(node); }, "up"), "up");
  }
  std::string NodeState(const std::string& id) {
    nlohmann::json nodes = Json(server_->Client(kRootToken).Get("/v1/nodes"));
    for (const auto& n : nodes["nodes"]) {
      if (n["id"] == id) return n["state"];
    }
    return "";
  }
  nlohmann::json Job(const std::string& id) { return Json(server_->Client(kAliceToken).Get("/v1/jobs/" + id)); }
  std::string Submit(const std::string& body) {
    return Json(server_->Client(kAliceToken).Post("/v1/jobs", body, "application/json")).value("id", "");
  }
  std::string Log(const std::string& id, const std::string& query) {
    auto r = server_->Client(kAliceToken).Get("/v1/jobs/" + id + "/logs?" + query);
    return r && r->status == 200 ? r->body : "";
  }
  template <typename F>
  std::string Wait(F f, const std::string& want) {
    std::string seen;
    for (int i = 0; i < 1500 && (seen = f()) != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return seen;
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

TEST_F(GangLaunch, TwoNodesMeetAtMasterAddrAndPortAndKeepTheirOwnLogs) {
  std::string id = Submit(fmt::format(R"({{"gpus": 8, "nodes": 2, "command": "python3 {}/rendezvous.py"}})", dir_));
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Wait([&] { return Job(id).value("state", ""); }, "succeeded"), "succeeded") << Job(id).dump();
  std::string rank0 = "rank 0 of 2 nproc 4 master 127.0.0.1\nrank 0 met rank 1\n";
  std::string rank1 = "rank 1 of 2 nproc 4 master 127.0.0.1\nrank 1 heard welcome\n";
  EXPECT_EQ(Wait([&] { return Log(id, "rank=0"); }, rank0), rank0);
  EXPECT_EQ(Wait([&] { return Log(id, "rank=1&run=1"); }, rank1), rank1);
  auto r = server_->Client(kAliceToken).Get("/v1/jobs/" + id + "/logs?rank=1");
  EXPECT_EQ(r->get_header_value("X-Log-Ranks"), "2");
  EXPECT_EQ(r->get_header_value("X-Log-Run"), "1");
  // gantry logs interleaves whole lines, each after its rank.
  std::string out;
  RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} logs {} 2>&1", server_->address(), kAliceToken,
                         GANTRY_BINARY, id),
             &out);
  EXPECT_NE(out.find("[rank 0] rank 0 met rank 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] rank 1 heard welcome\n"), std::string::npos) << out;
  out.clear();
  RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} logs --rank 1 {} 2>&1", server_->address(), kAliceToken,
                         GANTRY_BINARY, id),
             &out);
  EXPECT_EQ(out, rank1);
}

// gantry run on a gang: every rank's lines as they come, each after its rank (srun -l), and
// the job's exit code. The ranks exit once both have printed (a barrier of files): a rank
// that failed first would stop the other, maybe before it ran at all on a loaded machine.
TEST_F(GangLaunch, GantryRunPrefixesEachRanksLinesAndExitsWithTheJobsCode) {
  std::string out;
  int rc = RunCommand(fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} run --nodes 2 -g 8 -- "
                                  "'echo hello from $NODE_RANK; echo oops $NODE_RANK >&2; touch {}/printed-$NODE_RANK; "
                                  "until [ -e {}/printed-0 ] && [ -e {}/printed-1 ]; do sleep 0.1; done; exit 4' 2>&1",
                                  server_->address(), kAliceToken, GANTRY_BINARY, dir_, dir_, dir_),
                      &out);
  EXPECT_EQ(rc, 4) << out;
  for (const char* line :
       {"[rank 0] hello from 0\n", "[rank 1] hello from 1\n", "[rank 0] oops 0\n", "[rank 1] oops 1\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
}

TEST_F(GangLaunch, OneFailedRankStopsTheOthersAndTheGangFailsAsOne) {
  std::string id = Submit(
      R"({"gpus": 8, "nodes": 2, "command": "if [ $NODE_RANK = 1 ]; then exit 3; fi; echo waiting; sleep 300"})");
  ASSERT_EQ(Wait([&] { return Job(id).value("state", ""); }, "failed"), "failed") << Job(id).dump();
  EXPECT_EQ(Job(id).value("exit_code", 0), 3);
  EXPECT_NE(Job(id).value("reason", "").find("exited with 3"), std::string::npos) << Job(id).dump();
}

// Before: one stdout.log per job, where a requeued run's bytes landed by offset inside the
// first run's.
TEST_F(GangLaunch, EachRunOfARetriedJobKeepsItsOwnLog) {
  std::string id = Submit(
      R"({"gpus": 1, "retries_on_failure": 1, "command": "echo run $GANTRY_RESTART_COUNT; test $GANTRY_RESTART_COUNT = 1"})");
  ASSERT_EQ(Wait([&] { return Job(id).value("state", ""); }, "succeeded"), "succeeded") << Job(id).dump();
  EXPECT_EQ(Wait([&] { return Log(id, "run=1"); }, "run 0\n"), "run 0\n");
  EXPECT_EQ(Wait([&] { return Log(id, ""); }, "run 1\n"), "run 1\n");  // the latest run
}

TEST_F(GangLaunch, ANamedPortIsLentAndReachableAtItsUrl) {
  std::string id =
      Submit(R"({"gpus": 1, "ports": ["web"], "command": "cd /tmp && exec python3 -m http.server $GANTRY_PORT_WEB"})");
  ASSERT_EQ(Wait([&] { return Job(id).value("state", ""); }, "running"), "running");
  nlohmann::json job = Job(id);
  std::string url;
  for (const auto& p : job["ports"]) {
    if (p["name"] == "web") url = p["url"];
  }
  ASSERT_EQ(url.rfind("http://127.0.0.1:1", 0), 0u) << job.dump();
  int port = std::atoi(url.substr(url.rfind(':') + 1).c_str());
  httplib::Client web("127.0.0.1", port);
  std::string status;
  Wait(
      [&] {
        auto r = web.Get("/");
        return status = r ? std::to_string(r->status) : "";
      },
      "200");
  EXPECT_EQ(status, "200");
  server_->Client(kAliceToken).Delete("/v1/jobs/" + id);
  ASSERT_EQ(Wait([&] { return Job(id).value("state", ""); }, "cancelled"), "cancelled");
}

}  // namespace
}  // namespace gantry::testing
