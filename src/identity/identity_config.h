// identity.yaml: how people sign in (an OpenID Connect provider, login nodes' Unix
// accounts), which of their groups make them members of which team in which role, and how
// long Gantry's own sessions last. Absent, Gantry takes static tokens (users.yaml) only.
//
//   oidc:
//     issuer: https://keycloak.example.com/realms/acme
//     client_id: gantry
//     client_secret_file: /etc/gantry/oidc-client-secret
//     username_claim: preferred_username     # default
//     groups_claim: groups                   # default
//     bearer_audience: gantry-api            # also take the provider's JWTs with this aud
//   groups:                                  # provider group -> team and role
//     ml-vision: {team: vision}              # role: user unless said
//     ml-vision-leads: {team: vision, role: team-admin}
//     platform: {team: ops, role: admin}
//   sessions: {access: 1h, lifetime: 7d}
//   login_nodes:
//     groups: {vision: {team: vision}}       # Unix group -> team and role (default: groups:)
//     min_uid: 1000                          # system accounts get no session
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "identity/oidc_provider.h"

namespace gantry {

// What membership of one group gives: a team, and the role in it ("user", "team-admin";
// "admin" is an admin of the whole cluster whose own team is `team`).
struct GroupGrant {
  std::string team;
  std::string role = "user";
};
using GroupMap = std::map<std::string, GroupGrant>;

struct IdentityConfig {
  std::optional<OidcSettings> oidc;
  std::string username_claim = "preferred_username";
  std::string groups_claim = "groups";
  // Non-empty: the API also takes the provider's own JWTs as bearer tokens (automation with
  // a client-credentials or workload token) when their `aud` is this; no session is made.
  std::string bearer_audience;
  GroupMap groups;
  int64_t access_ttl_s = 3600;             // a session's access token; refreshed by its refresh token
  int64_t session_lifetime_s = 7 * 86400;  // then the user signs in again
  // A spent refresh token used again within this is a request that crossed a refresh of the
  // same session (two tabs at once): refused, the session goes on; later, a stolen copy:
  // the session is revoked.
  int64_t refresh_reuse_grace_s = 30;
  struct LoginNodes {
    GroupMap groups;  // Unix groups; empty: `groups` above
    int64_t min_uid = 1000;
    bool allow_admin = false;  // a login node may ask for an admin's session
  } login_nodes;

  static Expected<IdentityConfig> FromYaml(const std::string& text);
  // Reads the file and the client secret it names (relative paths: beside the file).
  static Expected<IdentityConfig> LoadFile(const std::string& path);
};

// A person's teams, each with their role in it (the strongest their groups give), and
// whether a group makes them an admin.
struct Memberships {
  std::map<std::string, std::string> teams;
  bool admin = false;
  bool empty() const { return teams.empty(); }
};
Memberships MapGroups(const std::vector<std::string>& groups, const GroupMap& map);

// The groups a token's claim names (a list of strings, or one string); others are ignored.
std::vector<std::string> GroupsOfClaim(const nlohmann::json& claims, const std::string& claim);
// The user name a token's claim gives (a user name Gantry and Unix accept: letters, digits,
// . _ -, not starting with - or ., at most 64 characters, never root), or why not.
Expected<std::string> UserNameOfClaims(const nlohmann::json& claims, const std::string& claim);
bool ValidUserName(const std::string& name);

}  // namespace gantry
