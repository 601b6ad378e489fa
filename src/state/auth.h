// Who is calling: bearer tokens from users.yaml (stored as SHA-256 hashes, never in
// clear), each naming a user, a team and a role; and what each role may do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/encoding.h"
#include "core/status.h"

namespace gantry {

// kAgent is a node agent's token: it may use /v1/agent/* only. kLoginNode is a login node's
// (a host where many Unix users run gantry): it may only ask for its users' sessions.
enum class Role : uint8_t { kUser, kTeamAdmin, kAdmin, kAgent, kLoginNode };
const char* ToString(Role r);
bool ParseRole(const std::string& text, Role* out);

struct Actor {
  std::string user;
  std::string team;
  Role role = Role::kUser;
  std::string node = "";  // agents: the one node this token speaks for
  // Agents of an autoscaled pool (instead of `node`): the nodes its scale-up hook started.
  std::string pool = "";
  // A signed-in person's other teams (identity.yaml's groups), whose jobs they may submit
  // (`--team`); they see a team's jobs by acting for it (X-Gantry-Team, GANTRY_TEAM).
  std::vector<std::string> other_teams = {};

  bool admin() const { return role == Role::kAdmin; }
  bool MemberOf(const std::string& t) const {
    return t == team || std::find(other_teams.begin(), other_teams.end(), t) != other_teams.end();
  }
  // Users and team admins see their own team's jobs; admins see every team's.
  bool SeesTeam(const std::string& t) const { return admin() || t == team; }
};

struct UserEntry {
  Actor actor;
  std::string token_sha256;        // hex
  int64_t expires_ms = INT64_MAX;  // users.yaml `expires` (UTC): refused from then on
};

// What a team's members may do, from users.yaml `teams:`. Teams not listed get the
// defaults: the default priority class and those below it, preemptible jobs only, jobs
// only as the members' own Unix accounts, never as root.
struct TeamPolicy {
  std::vector<std::string> priorities;  // classes its members may use; empty: the default and lower
  bool non_preemptible = false;         // may submit preemptible: false
  std::string unix_account;             // members without a Unix account on a node run as this
  bool allow_root = false;              // jobs may run as root (uid 0)
  // Notifications: hosts the members' job webhooks may go to (none: no job webhooks, so a
  // user cannot make the server POST to internal addresses), and the team's defaults for
  // jobs that name none (notify: {events: [fail], webhook: URL, format: slack}).
  std::vector<std::string> webhook_hosts;
  std::vector<std::string> notify_events;
  std::string notify_webhook;
  std::string notify_format;
};

// The token table and team policies. users.yaml:
//   users:
//     - {name: alice, team: vision, role: user, token_sha256: <64 hex digits>}
//     - {name: ci-bot, team: vision, token_sha256: ..., expires: "2027-06-30T00:00:00Z"}
//     - {name: login1, team: ops, role: login-node, token_sha256: ...}   # a login node's host token
//     - {name: agent-n1, team: ops, role: agent, node: n1, token_sha256: ...}
//     - {name: agent-spot, team: ops, role: agent, pool: spot-a100, token_sha256: ...}
//   teams:
//     vision: {priorities: [low, medium, high], non_preemptible: false, unix_account: gantry-vision,
//              webhook_hosts: [hooks.slack.com], notify: {events: [fail], webhook: URL, format: slack}}
class UserDirectory {
 public:
  static Expected<UserDirectory> FromYaml(const std::string& text);
  static Expected<UserDirectory> LoadFile(const std::string& path);

  void Add(const UserEntry& e);
  void SetTeam(const std::string& team, TeamPolicy policy) { teams_[team] = std::move(policy); }
  bool HasTeamPolicy(const std::string& team) const { return teams_.count(team) > 0; }
  // The actor a bearer token belongs to at wall-clock `now_ms`, or null (a token past its
  // expiry included).
  const Actor* Authenticate(const std::string& token, int64_t now_ms) const;
  // A person (not an agent) by user name, or null.
  const Actor* FindUser(const std::string& name) const;
  // The team's policy (the defaults for a team users.yaml does not list).
  const TeamPolicy& Team(const std::string& team) const;
  size_t size() const { return by_hash_.size(); }

 private:
  std::map<std::string, UserEntry> by_hash_;
  std::map<std::string, Actor> by_name_;
  std::map<std::string, TeamPolicy> teams_;
};

}  // namespace gantry
