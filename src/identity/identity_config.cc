// identity.yaml's reader and the mapping from groups to teams and roles.
#include "identity/identity_config.h"

#include <yaml-cpp/yaml.h>

#include "core/duration.h"
#include "core/yaml_util.h"

namespace gantry {

namespace {

int RoleRank(const std::string& role) { return role == "admin" ? 3 : role == "team-admin" ? 2 : 1; }

Expected<GroupMap> ReadGroups(const YAML::Node& node, const std::string& where) {
  GroupMap out;
  if (!node) return out;
  if (!node.IsMap()) return Status::Invalid(where, "must be a map of group names to {team, role}");
  for (const auto& kv : node) {
    std::string group = kv.first.Scalar();
    std::string at = where + "." + group;
    YamlReader r(kv.second, at);
    GroupGrant g;
    g.team = r.Required<std::string>("team");
    g.role = r.Optional<std::string>("role", "user");
    if (Status s = r.Finish(); !s.ok()) return s;
    if (g.role != "user" && g.role != "team-admin" && g.role != "admin") {
      return Status::Invalid(at + ".role", "must be user, team-admin or admin, not '" + g.role + "'");
    }
    if (g.team.empty() || g.team.find_first_of(" \t/") != std::string::npos) {
      return Status::Invalid(at + ".team", "must be a team name");
    }
    out[group] = g;
  }
  return out;
}

Expected<int64_t> ReadSeconds(YamlReader& r, const std::string& key, int64_t fallback_s) {
  std::string text = r.Optional<std::string>(key, "");
  if (text.empty()) return fallback_s;
  auto d = ParseDuration(text);
  if (!d || *d < 60 * 1000) return Status::Invalid(r.PathOf(key), "must be a duration of a minute or more (1h, 7d)");
  return *d / 1000;
}

// A few seconds to minutes (1s to 5m).
Expected<int64_t> ReadShortSeconds(YamlReader& r, const std::string& key, int64_t fallback_s) {
  std::string text = r.Optional<std::string>(key, "");
  if (text.empty()) return fallback_s;
  auto d = ParseDuration(text);
  if (!d || *d < 1000 || *d > 300 * 1000) return Status::Invalid(r.PathOf(key), "must be a duration from 1s to 5m");
  return *d / 1000;
}

}  // namespace

bool ValidUserName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "root" || name[0] == '-' || name[0] == '.') return false;
  return name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
         std::string::npos;
}

Expected<IdentityConfig> IdentityConfig::FromYaml(const std::string& text) {
  auto loaded = LoadYaml(text, "identity");
  if (!loaded) return loaded.status();
  YamlReader top(*loaded, "");
  YAML::Node oidc = top.Child("oidc");
  YAML::Node groups = top.Child("groups");
  YAML::Node sessions = top.Child("sessions");
  YAML::Node login_nodes = top.Child("login_nodes");
  if (Status s = top.Finish(); !s.ok()) return s;
  IdentityConfig c;
  if (oidc) {
    YamlReader r(oidc, "oidc");
    OidcSettings o;
    o.issuer = r.Required<std::string>("issuer");
    o.client_id = r.Required<std::string>("client_id");
    o.client_secret = r.Optional<std::string>("client_secret_file", "");  // the path, read by LoadFile
    o.ca_file = r.Optional<std::string>("ca_file", "");
    o.scopes = r.Optional<std::vector<std::string>>("scopes", o.scopes);
    o.skew_s = r.Optional<int>("clock_skew_s", o.skew_s);
    c.username_claim = r.Optional<std::string>("username_claim", c.username_claim);
    c.groups_claim = r.Optional<std::string>("groups_claim", c.groups_claim);
    c.bearer_audience = r.Optional<std::string>("bearer_audience", "");
    if (Status s = r.Finish(); !s.ok()) return s;
    if (std::find(o.scopes.begin(), o.scopes.end(), "openid") == o.scopes.end()) {
      return Status::Invalid("oidc.scopes", "must include openid");
    }
    if (o.skew_s < 0 || o.skew_s > 600) return Status::Invalid("oidc.clock_skew_s", "must be 0 to 600 seconds");
    c.oidc = o;
  }
  auto mapped = ReadGroups(groups, "groups");
  if (!mapped) return mapped.status();
  c.groups = std::move(*mapped);
  if (sessions) {
    YamlReader r(sessions, "sessions");
    auto access = ReadSeconds(r, "access", c.access_ttl_s);
    auto lifetime = ReadSeconds(r, "lifetime", c.session_lifetime_s);
    auto grace = ReadShortSeconds(r, "refresh_reuse_grace", c.refresh_reuse_grace_s);
    if (Status s = r.Finish(); !s.ok()) return s;
    if (!access) return access.status();
    if (!lifetime) return lifetime.status();
    if (!grace) return grace.status();
    c.refresh_reuse_grace_s = *grace;
    c.access_ttl_s = *access;
    c.session_lifetime_s = *lifetime;
    if (c.access_ttl_s > c.session_lifetime_s) {
      return Status::Invalid("sessions.access", "must not be longer than sessions.lifetime");
    }
  }
  if (login_nodes) {
    YamlReader r(login_nodes, "login_nodes");
    auto unix_groups = ReadGroups(r.Child("groups"), "login_nodes.groups");
    c.login_nodes.min_uid = r.Optional<int64_t>("min_uid", c.login_nodes.min_uid);
    c.login_nodes.allow_admin = r.Optional<bool>("allow_admin", false);
    if (Status s = r.Finish(); !s.ok()) return s;
    if (!unix_groups) return unix_groups.status();
    c.login_nodes.groups = std::move(*unix_groups);
    if (c.login_nodes.min_uid < 1) return Status::Invalid("login_nodes.min_uid", "must be 1 or more (never root)");
  }
  if (c.login_nodes.groups.empty()) c.login_nodes.groups = c.groups;
  return c;
}

Expected<IdentityConfig> IdentityConfig::LoadFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  auto c = FromYaml(*text);
  if (!c) return Status::Invalid(path + ": " + c.status().field(), c.status().message());
  if (c->oidc && !c->oidc->client_secret.empty()) {
    std::string secret_path = c->oidc->client_secret;
    if (secret_path[0] != '/') {
      size_t slash = path.rfind('/');
      secret_path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/" + secret_path;
    }
    auto secret = ReadTextFile(secret_path);
    if (!secret) return Status::Invalid(path + ": oidc.client_secret_file", secret.status().message());
    std::string s = *secret;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    if (s.empty()) return Status::Invalid(path + ": oidc.client_secret_file", secret_path + " is empty");
    c->oidc->client_secret = s;
  }
  return c;
}

Memberships MapGroups(const std::vector<std::string>& groups, const GroupMap& map) {
  Memberships m;
  for (const std::string& g : groups) {
    auto it = map.find(g);
    if (it == map.end()) continue;
    std::string& role = m.teams[it->second.team];
    if (role.empty() || RoleRank(it->second.role) > RoleRank(role)) role = it->second.role;
    m.admin = m.admin || it->second.role == "admin";
  }
  return m;
}

std::vector<std::string> GroupsOfClaim(const nlohmann::json& claims, const std::string& claim) {
  std::vector<std::string> out;
  auto it = claims.find(claim);
  if (it == claims.end()) return out;
  if (it->is_string()) out.push_back(it->get<std::string>());
  if (it->is_array()) {
    for (const auto& g : *it) {
      if (g.is_string() && out.size() < 1000) out.push_back(g.get<std::string>());
    }
  }
  return out;
}

Expected<std::string> UserNameOfClaims(const nlohmann::json& claims, const std::string& claim) {
  auto it = claims.find(claim);
  if (it == claims.end() || !it->is_string()) {
    return Status{StatusCode::kUnauthenticated, "the provider's token has no " + claim + " claim to name the user",
                  claim};
  }
  std::string name = it->get<std::string>();
  if (!ValidUserName(name)) {
    return Status{
        StatusCode::kUnauthenticated,
        "'" + name.substr(0, 64) + "' (" + claim + ") is not a user name Gantry accepts (letters, digits, . _ -)",
        claim};
  }
  return name;
}

}  // namespace gantry
