// The user directory: users, roles and team policies from users.yaml.
#include "state/auth.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/notify.h"
#include "core/time.h"
#include "core/yaml_util.h"

namespace gantry {

namespace {
constexpr const char* kRoleNames[] = {"user", "team-admin", "admin", "agent", "login-node"};
constexpr const char* kAccountChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
}  // namespace

const char* ToString(Role r) { return kRoleNames[static_cast<int>(r)]; }

bool ParseRole(const std::string& text, Role* out) {
  for (int i = 0; i < 5; ++i) {
    if (text == kRoleNames[i]) {
      *out = static_cast<Role>(i);
      return true;
    }
  }
  return false;
}

namespace {

Status CheckTeamNotify(const std::string& where, const TeamPolicy& p) {
  if (Status s = CheckNotifyEvents(where + ".notify.events", p.notify_events); !s.ok()) return s;
  if (!p.notify_webhook.empty()) {
    if (Status s = CheckWebhookUrl(where + ".notify.webhook", p.notify_webhook); !s.ok()) return s;
  }
  if (Status s = CheckNotifyFormat(where + ".notify.format", p.notify_format); !s.ok()) return s;
  for (const std::string& host : p.webhook_hosts) {
    if (host.empty() || host.find_first_of("/:@ \t") != std::string::npos) {
      return Status::Invalid(where + ".webhook_hosts",
                             "host names only (hooks.slack.com, *.example.org), not '" + host.substr(0, 60) + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<UserDirectory> UserDirectory::FromYaml(const std::string& text) {
  auto loaded = LoadYaml(text, "users");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  YamlReader top(root, "");
  YAML::Node users = top.Child("users");
  YAML::Node teams = top.Child("teams");
  if (Status s = top.Finish(); !s.ok()) return s;
  UserDirectory dir;
  if (teams && !teams.IsMap()) return Status::Invalid("teams", "must be a map of team names");
  for (const auto& kv : teams) {
    std::string team = kv.first.Scalar();
    std::string where = "teams." + team;
    YamlReader r(kv.second, where);
    TeamPolicy p;
    p.priorities = r.Optional<std::vector<std::string>>("priorities", {});
    p.non_preemptible = r.Optional<bool>("non_preemptible", false);
    p.unix_account = r.Optional<std::string>("unix_account", "");
    p.allow_root = r.Optional<bool>("allow_root", false);
    p.webhook_hosts = r.Optional<std::vector<std::string>>("webhook_hosts", {});
    YamlReader n(r.Child("notify"), where + ".notify");
    p.notify_events = n.Optional<std::vector<std::string>>("events", {});
    p.notify_webhook = n.Optional<std::string>("webhook", "");
    p.notify_format = n.Optional<std::string>("format", "");
    if (Status s = n.Finish(); !s.ok()) return s;
    if (Status s = r.Finish(); !s.ok()) return s;
    if (Status s = CheckTeamNotify(where, p); !s.ok()) return s;
    if (!p.unix_account.empty() && p.unix_account.find_first_not_of(kAccountChars) != std::string::npos) {
      return Status::Invalid(where + ".unix_account", "must be a Unix user name (letters, digits, . _ -)");
    }
    dir.SetTeam(team, std::move(p));
  }
  if (!users) return dir;
  if (!users.IsSequence()) return Status::Invalid("users", "must be a list");
  for (size_t i = 0; i < users.size(); ++i) {
    std::string where = fmt::format("users[{}]", i);
    YamlReader r(users[i], where);
    UserEntry e;
    e.actor.user = r.Required<std::string>("name");
    e.actor.team = r.Required<std::string>("team");
    std::string role = r.Optional<std::string>("role", "user");
    e.token_sha256 = r.Required<std::string>("token_sha256");
    e.actor.node = r.Optional<std::string>("node", "");
    e.actor.pool = r.Optional<std::string>("pool", "");
    std::string expires = r.Optional<std::string>("expires", "");
    if (Status s = r.Finish(); !s.ok()) return s;
    if (!expires.empty() && !ParseUtc(expires, &e.expires_ms)) {
      return Status::Invalid(where + ".expires", "must be a UTC time: 2027-06-30T00:00:00Z, not '" + expires + "'");
    }
    if (!ParseRole(role, &e.actor.role)) {
      return Status::Invalid(where + ".role",
                             "must be user, team-admin, admin, agent or login-node, not '" + role + "'");
    }
    const bool bound = !e.actor.node.empty() || !e.actor.pool.empty();
    if ((e.actor.role == Role::kAgent) != bound || (!e.actor.node.empty() && !e.actor.pool.empty())) {
      return Status::Invalid(where + (e.actor.node.empty() ? ".pool" : ".node"),
                             e.actor.role != Role::kAgent ? "only agent tokens are bound to a node or a pool"
                             : bound                      ? "an agent token names one node or one pool, not both"
                                     : "an agent token must name the one node (or the node pool) it speaks for");
    }
    if (e.token_sha256.size() != 64 || e.token_sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return Status::Invalid(where + ".token_sha256", "must be 64 lower-case hex digits (gantry token hash)");
    }
    dir.Add(e);
  }
  return dir;
}

Expected<UserDirectory> UserDirectory::LoadFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  auto dir = FromYaml(*text);
  if (!dir) return Status::Invalid(path + ": " + dir.status().field(), dir.status().message());
  return dir;
}

void UserDirectory::Add(const UserEntry& e) {
  by_hash_.insert_or_assign(e.token_sha256, e);
  if (e.actor.role != Role::kAgent && e.actor.role != Role::kLoginNode)
    by_name_.insert_or_assign(e.actor.user, e.actor);
}

const Actor* UserDirectory::FindUser(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const TeamPolicy& UserDirectory::Team(const std::string& team) const {
  static const TeamPolicy kDefaults;
  auto it = teams_.find(team);
  return it == teams_.end() ? kDefaults : it->second;
}

const Actor* UserDirectory::Authenticate(const std::string& token, int64_t now_ms) const {
  if (token.empty()) return nullptr;
  auto it = by_hash_.find(Sha256Hex(token));
  if (it == by_hash_.end()) return nullptr;
  if (it->second.expires_ms != INT64_MAX && now_ms >= it->second.expires_ms) return nullptr;
  return &it->second.actor;
}

}  // namespace gantry
