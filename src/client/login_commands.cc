// gantry login / logout / whoami / tokens.
#include "client/login_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <thread>

#include "client/session_file.h"
#include "client/tables.h"
#include "core/json_fields.h"

namespace gantry {

namespace {

std::string TeamsOf(const nlohmann::json& teams) {
  std::string out;
  if (!teams.is_object()) return out;
  for (const auto& [team, role] : teams.items()) {
    std::string r = role.is_string() ? role.get<std::string>() : "";
    out += (out.empty() ? "" : ", ") + team + (r == "user" || r.empty() ? "" : " (" + r + ")");
  }
  return out;
}

// The device grant: the user finishes at the provider while this polls the server.
int Login(ClientConfig cfg, std::ostream& out, std::ostream& err) {
  cfg.no_session = true;  // a session that ended must not stop a new sign-in
  if (Status s = ResolveClientConfig(cfg); !s.ok()) {
    err << "gantry: " << s.ToString() << "\n";
    return 2;
  }
  cfg.token.clear();
  ApiClient api(cfg);
  auto config = api.Get("/v1/auth/config");
  if (!config || config->status != 200) {
    err << "gantry: " << (config ? DescribeError(*config) : config.status().message()) << "\n";
    return 1;
  }
  if (!BoolAt(config->body, "oidc")) {
    err << "gantry: " << cfg.server
        << " has no single sign-on (identity.yaml oidc:): use the token your admin gave you (--token-file, "
           "GANTRY_TOKEN)\n";
    return 1;
  }
  auto started = api.Post("/v1/auth/device", "{}", "application/json");
  if (!started || started->status != 200) {
    err << "gantry: " << (started ? DescribeError(*started) : started.status().message()) << "\n";
    return 1;
  }
  const nlohmann::json& d = started->body;
  const std::string complete = StringAt(d, "verification_uri_complete");
  out << "To sign in to " << cfg.server << " (" << StringAt(config->body, "issuer") << "), open\n  "
      << StringAt(d, "verification_uri") << "\nand enter the code\n  " << StringAt(d, "user_code") << "\n";
  if (!complete.empty()) out << "(or open " << complete << ")\n";
  out << "Waiting for you to finish there (Ctrl-C gives up)..." << std::endl;
  int interval_s = static_cast<int>(std::clamp<int64_t>(IntAt(d, "interval"), 1, 60));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(std::clamp<int64_t>(IntAt(d, "expires_in"), 1, 3600));
  const std::string poll = nlohmann::json{{"device_code", StringAt(d, "device_code")}}.dump();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(interval_s));
    auto a = api.Post("/v1/auth/device/token", poll, "application/json");
    if (!a) {
      err << "gantry: " << a.status().message() << "\n";
      return 1;
    }
    std::string code = StringAt(ObjectAt(a->body, "error"), "code");
    if (a->status == 400 && code == "authorization_pending") continue;
    if (a->status == 400 && code == "slow_down") {
      interval_s += 5;
      continue;
    }
    if (a->status != 200) {
      err << "gantry: sign-in refused: " << DescribeError(*a) << "\n";
      return 1;
    }
    // A session signed in before from here ends: one session per server and home.
    if (std::optional<SavedSession> old = LoadSession(cfg.server); old && !old->refresh_token.empty()) {
      ClientConfig previous = cfg;
      previous.token = old->access_token;
      ApiClient(previous)
          .Post("/v1/auth/logout", nlohmann::json{{"refresh_token", old->refresh_token}}.dump(), "application/json")
          .ok();
    }
    SavedSession s = SessionOfAnswer(cfg.server, a->body, "oidc");
    if (Status saved = SaveSession(s); !saved.ok()) {
      err << "gantry: " << saved.ToString() << "\n";
      return 1;
    }
    out << "Signed in to " << cfg.server << " as " << s.user << " (teams: " << TeamsOf(ObjectAt(a->body, "teams"))
        << (BoolAt(a->body, "admin") ? "; admin" : "") << "), acting for " << s.team << ". Session kept in "
        << SessionFilePath() << "\n";
    return 0;
  }
  err << "gantry: the code expired before the sign-in finished: run gantry login again\n";
  return 1;
}

int Logout(ClientConfig cfg, std::ostream& out, std::ostream& err) {
  cfg.no_session = true;
  if (Status s = ResolveClientConfig(cfg); !s.ok()) {
    err << "gantry: " << s.ToString() << "\n";
    return 2;
  }
  std::optional<SavedSession> saved = LoadSession(cfg.server);
  if (!saved) {
    out << "Not signed in to " << cfg.server << "\n";
    return 0;
  }
  cfg.token = saved->access_token;
  ApiClient api(cfg);
  auto a =
      api.Post("/v1/auth/logout", nlohmann::json{{"refresh_token", saved->refresh_token}}.dump(), "application/json");
  ForgetSession(cfg.server);
  if (!a || a->status != 200) {
    err << "gantry: the server did not confirm the sign-out (" << (a ? DescribeError(*a) : a.status().message())
        << "); the session is forgotten here\n";
    return 1;
  }
  out << "Signed out of " << cfg.server << "\n";
  return 0;
}

void PrintSessions(std::ostream& out, const nlohmann::json& body) {
  out << fmt::format("{:<19} {:<12} {:<22} {:<20} {:<8} {:<21} {:<16} {}\n", "ID", "USER", "SOURCE", "TEAMS", "STATE",
                     "LAST USED", "FROM", "EXPIRES");
  for (const auto& s : ArrayAt(body, "sessions")) {
    std::string teams;
    const nlohmann::json& members = ObjectAt(s, "teams");
    for (const auto& [team, role] : members.items()) teams += (teams.empty() ? "" : ",") + team;
    out << fmt::format("{:<19} {:<12} {:<22} {:<20} {:<8} {:<21} {:<16} {}\n", StringAt(s, "id"), StringAt(s, "user"),
                       StringAt(s, "source"), teams + (BoolAt(s, "admin") ? " (admin)" : ""), StringAt(s, "state"),
                       StringAt(s, "last_used").empty() ? "-" : StringAt(s, "last_used"),
                       StringAt(s, "last_address").empty() ? "-" : StringAt(s, "last_address"), StringAt(s, "expires"));
  }
}

}  // namespace

void AddLoginCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& p) {
  auto request = p.request;
  auto chosen = p.chosen;
  auto cfg = p.cfg;
  if (p.wants("login")) {
    CLI::App* c = app.add_subcommand("login", "Sign in with your organisation's identity provider (single sign-on)");
    p.common(c);
    c->callback([=, &out, &err] { *chosen = [=, &out, &err] { return Login(*cfg, out, err); }; });
  }
  if (p.wants("logout")) {
    CLI::App* c = app.add_subcommand("logout", "End this server's session (gantry login's)");
    p.common(c);
    c->callback([=, &out, &err] { *chosen = [=, &out, &err] { return Logout(*cfg, out, err); }; });
  }
  if (p.wants("whoami")) {
    CLI::App* c = app.add_subcommand("whoami", "Who the server takes you for: user, team and role");
    p.common(c);
    c->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/whoami"); },
                       [&out](const nlohmann::json& b) {
                         std::string teams;
                         for (const auto& t : ArrayAt(b, "teams")) {
                           if (t.is_string()) teams += (teams.empty() ? "" : ", ") + t.get<std::string>();
                         }
                         out << StringAt(b, "user") << " (team " << StringAt(b, "team") << ", role "
                             << StringAt(b, "role") << ")";
                         if (ArrayAt(b, "teams").size() > 1) out << "; may act for: " << teams;
                         out << "\n";
                       });
      };
    });
  }
  if (p.wants("tokens")) {
    CLI::App* tokens = app.add_subcommand("tokens", "Sign-in sessions and their last use (admins: everyone's)");
    tokens->require_subcommand(1);
    CLI::App* list = tokens->add_subcommand("list", "Sessions, newest first");
    p.common(list);
    list->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/tokens"); },
                       [&out](const nlohmann::json& b) { PrintSessions(out, b); });
      };
    });
    auto ids = std::make_shared<std::vector<std::string>>();
    CLI::App* revoke = tokens->add_subcommand("revoke", "End sessions at once (their tokens stop working)");
    p.common(revoke);
    revoke->add_option("ids", *ids, "Session ids (gantry tokens list)")->required();
    revoke->callback([=, &out] {
      *chosen = [=, &out] {
        int rc = 0;
        for (const std::string& id : *ids) {
          int one = request([id](ApiClient& a) { return a.Delete("/v1/tokens/" + id); },
                            [&out](const nlohmann::json& b) {
                              out << "session " << StringAt(b, "revoked") << " of " << StringAt(b, "user")
                                  << ": revoked\n";
                            });
          rc = std::max(rc, one);
        }
        return rc;
      };
    });
  }
}

}  // namespace gantry
