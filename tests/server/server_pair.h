// Two `gantry server` processes on one throw-away PostgreSQL, each on a loopback port fixed
// in advance (so a server killed and started again serves where it did, and clients can be
// given both addresses), and what the HA tests ask of them.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "controller_harness.h"
#include "loopback.h"
#include "scratch_postgres.h"
#include "server_process.h"

namespace gantry::testing {

// The address a standby answers on, from its log ("standby on URL: ...").
inline std::string StandbyAddress(const ServerProcess& s, int seconds = 10) {
  const std::string marker = "standby on ";
  for (int i = 0; i < seconds * 20; ++i) {
    std::ifstream in(s.dir() + "/server.log");
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    size_t at = all.find(marker);
    size_t end = at == std::string::npos ? at : all.find(": ", at);  // "standby on URL: answering ..."
    if (end != std::string::npos) return all.substr(at + marker.size(), end - at - marker.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

inline httplib::Result SubmitTo(const std::string& address, const std::string& key) {
  httplib::Client c(address);
  c.set_bearer_token_auth(kAliceToken);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  return c.Post("/v1/jobs", {{"Idempotency-Key", key}}, R"({"gpus": 1, "hold_gpus": "1h", "name": ")" + key + R"("})",
                "application/json");
}

inline std::set<std::string> JobNames(const std::string& address) {
  httplib::Client c(address);
  c.set_bearer_token_auth(kRootToken);
  auto r = c.Get("/v1/jobs?limit=10000");
  std::set<std::string> names;
  if (!r || r->status != 200) return names;
  nlohmann::json jobs = nlohmann::json::parse(r->body);
  for (const auto& j : jobs["jobs"]) names.insert(j["name"].get<std::string>());
  return names;
}

// Two cluster servers on one store, with a 2 s lease (or `lease_s`), on ports chosen in advance; agents
// may be added (the jobs stay pending without).
struct Pair {
  ScratchPostgres pg;
  ServerProcess a, b;
  const int port_a = FreeLoopbackPort(), port_b = FreeLoopbackPort();
  explicit Pair(const std::string& name, std::vector<std::string> more = {}, const std::string& lease_s = "2")
      : a(Fresh(name + "-a"), ""), b(Fresh(name + "-b"), "") {
    a.AddArgs({"--listen", "127.0.0.1:" + std::to_string(port_a)});
    b.AddArgs({"--listen", "127.0.0.1:" + std::to_string(port_b)});
    for (ServerProcess* s : {&a, &b}) {
      s->AddArgs({"--db", pg.url(), "--leader-lease", lease_s});
      s->AddArgs(more);
    }
  }
  // Both servers' addresses, as an agent's or the CLI's --server takes them.
  std::vector<std::string> urls() const {
    return {"http://127.0.0.1:" + std::to_string(port_a), "http://127.0.0.1:" + std::to_string(port_b)};
  }
  std::string server_list() const { return urls()[0] + "," + urls()[1]; }
  static std::string Fresh(const std::string& name) {
    std::string dir = TempPath(name);
    std::filesystem::remove_all(dir);
    return dir;
  }
};

}  // namespace gantry::testing
