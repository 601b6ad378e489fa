// The CLI's sign-in sessions: `gantry login` keeps a session per server in
// ~/.config/gantry/sessions.json (0600); a command without a token uses it, refreshing it
// at the server when its access token is due. On a login node (a host whose
// `gantry login-node` listens on /run/gantry/login.sock, or $GANTRY_LOGIN_SOCKET) a
// command without a token asks that local service, which knows the caller by the kernel's
// peer credentials, for a session of the caller's own Unix account.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace gantry {

struct ClientConfig;

struct SavedSession {
  std::string server;
  std::string access_token;
  std::string refresh_token;     // empty: none (a login node's session is asked for again)
  int64_t access_expires_s = 0;  // seconds since the epoch
  std::string user;
  std::string team;
  std::string source;  // "oidc" or "login-node"
};

std::string SessionFilePath();
std::optional<SavedSession> LoadSession(const std::string& server);
Status SaveSession(const SavedSession& s);
void ForgetSession(const std::string& server);
// A sign-in answer ({access_token, refresh_token?, expires_in, user, team}) as a session.
SavedSession SessionOfAnswer(const std::string& server, const nlohmann::json& answer, const std::string& source);

// The access token of this server's session, refreshed first when due, or from the login
// node's service; "" when there is neither. `c.server` and `c.ca_cert` are resolved.
Expected<std::string> SessionToken(const ClientConfig& c);

// The server to use when none is configured: the one this user is signed in to when there
// is exactly one, else the login node's (its service is asked, and its session kept), else "".
std::string ImpliedServer();

// The login node's socket ($GANTRY_LOGIN_SOCKET, else /run/gantry/login.sock).
std::string LoginSocketPath();
// Asks the login node's service for a session (its JSON answer), or why not.
Expected<nlohmann::json> AskLoginNode(const std::string& socket_path);

}  // namespace gantry
