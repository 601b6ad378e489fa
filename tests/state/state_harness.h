// What every test of the controller's state uses, with no server: a node link that records
// the orders, the harness's users and teams, the users as actors, and an agent's exit report.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/encoding.h"
#include "protocol/node_link.h"
#include "state/auth.h"

namespace gantry::testing {

// Records orders; tests answer them by calling the controller's Report* methods.
class RecordingLink : public NodeLink {
 public:
  void Start(const StartOrder& o) override {
    std::lock_guard<std::mutex> lock(mu);
    starts.push_back(o);
  }
  void Stop(const StopOrder& o) override {
    std::lock_guard<std::mutex> lock(mu);
    stops.push_back(o);
  }
  std::mutex mu;
  std::vector<StartOrder> starts;
  std::vector<StopOrder> stops;
};

// The harness's users: alice (vision) and bob (nlp), a vision team admin and an ops
// admin; both teams may use every priority class and non-preemptible jobs, so tests of
// the engine's mechanisms are not tests of permissions (tests/security/ has those). Only
// vision may send job webhooks, to 127.0.0.1.
inline std::shared_ptr<const UserDirectory> HarnessUsers() {
  auto users = std::make_shared<UserDirectory>();
  const char* rows[][3] = {
      {"alice", "vision", "user"}, {"bob", "nlp", "user"}, {"lead", "vision", "team-admin"}, {"root", "ops", "admin"}};
  for (auto& r : rows) {
    UserEntry e{{r[0], r[1], Role::kUser}, Sha256Hex(std::string(r[0]) + "-token")};
    ParseRole(r[2], &e.actor.role);
    users->Add(e);
  }
  for (const char* team : {"vision", "nlp", "speech"}) {
    TeamPolicy p;
    p.priorities = {"critical", "high", "medium", "low"};
    p.non_preemptible = true;
    if (std::string(team) == "vision") p.webhook_hosts = {"127.0.0.1"};  // job webhooks to loopback receivers
    users->SetTeam(team, std::move(p));
  }
  return users;
}

// What an agent reports when a run ends (`ended_ms` -1: now).
inline RunReport ExitReport(const std::string& job_id, int run, const std::string& node_id, int exit_code,
                            const std::string& reason, TimeMs ended_ms = -1) {
  return {job_id, run, node_id, true, exit_code, reason, ended_ms};
}

inline const Actor kAdmin{"root", "ops", Role::kAdmin};
inline const Actor kAlice{"alice", "vision", Role::kUser};
inline const Actor kBob{"bob", "nlp", Role::kUser};

}  // namespace gantry::testing
