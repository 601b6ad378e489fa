// A cluster server with node pools (pools.yaml) on a known loopback port, for the
// autoscaler's integration tests: pool agent tokens, hook commands, and reading the queue,
// the nodes, the jobs and /metrics.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "controller_harness.h"
#include "loopback.h"
#include "server_process.h"

namespace gantry::testing {

// The token of pool `pool`'s agents (users.yaml: role agent, pool: POOL).
inline std::string PoolToken(const std::string& pool) { return "pool-token-" + pool; }

class ElasticCluster {
 public:
  // A cluster server in TempPath(name) (not started); each of `pool_names` gets an agent
  // token (PoolToken) and its token file DIR/POOL.token. WritePools gives pools.yaml.
  ElasticCluster(const std::string& name, const std::vector<std::string>& pool_names) : dir_(TempPath(name)) {
    std::filesystem::remove_all(dir_);
    server_ = std::make_unique<ServerProcess>(dir_, "");
    // Jobs run as `nobody` on a root agent: they keep their checkpoints in this directory.
    std::filesystem::permissions(dir_, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    std::ofstream users(dir_ + "/config/users.yaml", std::ios::app);
    for (const std::string& pool : pool_names) {
      users << "  - {name: agent-pool-" << pool << ", team: ops, role: agent, pool: " << pool
            << ", token_sha256: " << Sha256Hex(PoolToken(pool)) << "}\n";
      std::ofstream(dir_ + "/" + pool + ".token") << PoolToken(pool) << "\n";
    }
    port_ = FreeLoopbackPort();
    server_->AddArgs({"--listen", fmt::format("127.0.0.1:{}", port_), "--node-timeout", "3"});
  }
  ~ElasticCluster() {
    server_.reset();
    std::system(fmt::format("FAKE_CLOUD_DIR={}/cloud {} stop-all >/dev/null 2>&1", dir_, FakeCloud()).c_str());
  }
  static std::string FakeCloud() { return std::string(GANTRY_SOURCE_DIR "/scripts/fake-cloud.sh"); }
  // The fake cloud's hook command for `pool` (up or down): its settings in front.
  std::string CloudHook(const std::string& pool, const std::string& verb) const {
    return fmt::format(
        "FAKE_CLOUD_DIR={0}/cloud GANTRY_BINARY={1} GANTRY_SERVER=http://127.0.0.1:{2} "
        "FAKE_CLOUD_TOKEN_FILE={0}/{3}.token FAKE_CLOUD_AGENT_ARGS='--config {0}/config' {4} {5}",
        dir_, GANTRY_BINARY, port_, pool, FakeCloud(), verb);
  }
  void WritePools(const std::string& yaml) { std::ofstream(dir_ + "/config/pools.yaml") << yaml; }
  void Start() { server_->Start(); }
  // Runs the fake cloud's command (reclaim, nodes, ...) and returns its output.
  std::string Cloud(const std::string& args) const {
    std::string out;
    FILE* p = popen(fmt::format("FAKE_CLOUD_DIR={}/cloud {} {}", dir_, FakeCloud(), args).c_str(), "r");
    char buf[256];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
  }

  httplib::Client Root() { return server_->Client(kRootToken); }
  httplib::Client Alice() { return server_->Client(kAliceToken); }
  std::string Submit(const std::string& json) {
    auto r = Alice().Post("/v1/jobs", json, "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return Json(r).value("id", "");
  }
  nlohmann::json Job(const std::string& id) { return Json(Root().Get("/v1/jobs/" + id)); }
  std::string JobState(const std::string& id) { return Job(id).value("state", ""); }
  // Node id -> state, of the nodes not down.
  std::map<std::string, std::string> LiveNodes() {
    std::map<std::string, std::string> out;
    nlohmann::json nodes = Json(Root().Get("/v1/nodes"));
    for (const auto& n : nodes["nodes"]) {
      if (n["state"] != "down") out[n["id"]] = n["state"];
    }
    return out;
  }
  // The queue's reason for job `id` ("" when it is not waiting).
  std::string QueueReason(const std::string& id) {
    nlohmann::json q = Json(Root().Get("/v1/queue"));
    for (const auto& e : q["queue"]) {
      if (e["id"] == id) return e["reason"];
    }
    return "";
  }
  // A sample of /metrics, e.g. `gantry_spot_reclaims_total{pool="spot"}`; -1 when absent.
  double Metric(const std::string& sample) {
    std::string body = Root().Get("/metrics")->body;
    size_t at = body.find("\n" + sample + " ");
    return at == std::string::npos ? -1 : std::stod(body.substr(at + sample.size() + 2));
  }
  // Polls `ok` every 100 ms for up to `seconds`; true once it holds.
  template <typename F>
  bool WaitFor(F ok, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ok();
  }
  const std::string& dir() const { return dir_; }
  ServerProcess& server() { return *server_; }

 private:
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

}  // namespace gantry::testing
