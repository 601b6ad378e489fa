// Gantry's own sessions: what a sign-in (an OpenID Connect provider, or a login node for one
// of its Unix users) gives a person: a short-lived access token and, for provider sign-ins,
// a refresh token that is renewed at the provider (so group changes and disabled accounts
// take effect there). Tokens are kept as SHA-256 hashes; sessions are listed with their
// last use and revocable. Thread-safe: the HTTP workers authenticate with it.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct Session {
  std::string id;  // the handle `gantry tokens` shows ("s-" and 16 hex digits)
  std::string user;
  std::string subject;                       // the provider's `sub`, or unix:UID@HOST for a login node's
  std::string source;                        // "oidc" or "login-node HOST"
  std::map<std::string, std::string> teams;  // team -> role (user, team-admin)
  bool admin = false;
  std::string default_team;
  std::vector<std::string> groups;  // as the provider (or the login node) named them
  std::string access_sha256;        // the newest access token's
  // Access tokens handed out before the last refresh, still good until their own end (another
  // tab of the same browser, a CLI beside it), by hash; the newest few only.
  std::map<std::string, TimeMs> earlier_access;
  std::string refresh_sha256;  // empty: the session cannot be refreshed
  // Refresh tokens this session already spent, by hash, with when: one used again is a copy
  // (stolen, or a tab's request that crossed another's refresh); the newest few only.
  std::map<std::string, TimeMs> spent_refresh;
  std::string provider_refresh;  // the provider's refresh token (never leaves the server)
  TimeMs created_ms = 0;
  TimeMs access_expires_ms = 0;
  TimeMs expires_ms = 0;  // the session's end: then its owner signs in again
  TimeMs last_used_ms = 0;
  std::string last_address;
  TimeMs revoked_ms = 0;
  std::string revoked_by;

  bool Live(TimeMs now) const { return revoked_ms == 0 && now < expires_ms; }
};

nlohmann::json SessionToDoc(const Session& s);
Expected<Session> SessionFromDoc(const std::string& text);
// What `gantry tokens list` shows of a session (no token hashes, no provider token).
nlohmann::json SessionView(const Session& s, TimeMs now);

// A session's tokens, given once when it is made or refreshed.
struct SessionTokens {
  Session session;
  std::string access_token;
  std::string refresh_token;  // empty when the session has none
};

class SessionTable {
 public:
  // Sessions read back from the store at start or take-over.
  void Load(const std::vector<std::string>& docs);
  // A new session for `base`'s person (id, tokens and times are set here).
  SessionTokens Create(Session base, TimeMs now, int64_t access_ttl_s, int64_t lifetime_s, bool refreshable);
  // The live session an access token belongs to (its last use noted), or null.
  std::optional<Session> Authenticate(const std::string& access_token, TimeMs now, const std::string& address);
  // The live session a refresh token belongs to, or null.
  std::optional<Session> FindByRefresh(const std::string& refresh_token, TimeMs now);
  // The live session that already spent `refresh_token`, and when it did, or null.
  std::optional<std::pair<Session, TimeMs>> FindSpentRefresh(const std::string& refresh_token, TimeMs now);
  // New tokens for a session whose refresh was honoured, with what the provider now says
  // of the person (`renewed` carries teams, groups, provider_refresh); the old refresh
  // token is spent (a stolen copy used after the owner's refresh finds nothing).
  std::optional<SessionTokens> Rotate(const Session& renewed, TimeMs now, int64_t access_ttl_s);
  // Revokes a session; false when there is none with that id.
  bool Revoke(const std::string& id, const std::string& by, TimeMs now);
  std::optional<Session> Find(const std::string& id) const;
  // Every session, newest first.
  std::vector<Session> All() const;
  // What to write to the store: sessions changed since the last call (their last use only
  // when a minute old), and ids of sessions ended a week ago (to delete).
  std::vector<std::pair<std::string, std::string>> TakeChanged(TimeMs now);

 private:
  void Index(const Session& s);
  void Unindex(const Session& s);

  mutable std::mutex mu_;
  std::map<std::string, Session> by_id_;
  std::map<std::string, std::string> id_of_access_;
  std::map<std::string, std::string> id_of_refresh_;
  std::map<std::string, std::string> id_of_spent_refresh_;
  std::set<std::string> changed_;
  std::map<std::string, TimeMs> use_saved_ms_;  // the last use the store has, by session
};

}  // namespace gantry
