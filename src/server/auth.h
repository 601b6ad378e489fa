// Who is calling: bearer tokens from users.yaml (stored as SHA-256 hashes, never in
// clear), each naming a user, a team and a role; and what each role may do.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

// kAgent is a node agent's token: it may use /v1/agent/* only.
enum class Role : uint8_t { kUser, kTeamAdmin, kAdmin, kAgent };
const char* ToString(Role r);
bool ParseRole(const std::string& text, Role* out);

struct Actor {
  std::string user;
  std::string team;
  Role role = Role::kUser;

  bool admin() const { return role == Role::kAdmin; }
  // Users and team admins see their own team's jobs; admins see every team's.
  bool SeesTeam(const std::string& t) const { return admin() || t == team; }
};

struct UserEntry {
  Actor actor;
  std::string token_sha256;  // hex
};

// The token table. users.yaml:
//   users:
//     - {name: alice, team: vision, role: user, token_sha256: <64 hex digits>}
class UserDirectory {
 public:
  static Expected<UserDirectory> FromYaml(const std::string& text);
  static Expected<UserDirectory> LoadFile(const std::string& path);

  void Add(const UserEntry& e) { by_hash_.insert_or_assign(e.token_sha256, e); }
  // The actor a bearer token belongs to, or null.
  const Actor* Authenticate(const std::string& token) const;
  size_t size() const { return by_hash_.size(); }

 private:
  std::map<std::string, UserEntry> by_hash_;
};

// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(const std::string& text);
// A fresh random token: "gtk_" and 43 characters of URL-safe base64 (256 bits).
std::string NewToken();

}  // namespace gantry
