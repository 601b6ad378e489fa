// The identity service: sign-ins through the provider or a login node, refreshes, sign-outs
// and the session list, each audited.
#include "server/identity_service.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

namespace {

constexpr DurationMs kBrowserSignInMs = 10 * 60 * 1000;  // a sign-in at the provider must end within this
constexpr size_t kMaxPending = 10000;                    // device sign-ins under way at once
constexpr const char* kSignInPurpose = "gantry browser sign-in v1";
constexpr int kStartsPerMinute = 30;  // per caller address

Status Refused(const std::string& field, const std::string& why) { return {StatusCode::kUnauthenticated, why, field}; }

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

std::string TeamsText(const std::map<std::string, std::string>& teams) {
  std::string out;
  for (const auto& [team, role] : teams) out += (out.empty() ? "" : ",") + team + (role == "user" ? "" : "/" + role);
  return out;
}

template <typename Map>
void DropExpired(Map& pending, TimeMs now) {
  for (auto it = pending.begin(); it != pending.end();) it = it->second.expires_ms <= now ? pending.erase(it) : ++it;
}

}  // namespace

nlohmann::json SignedIn::View() const {
  const Session& s = tokens.session;
  nlohmann::json v = {{"access_token", tokens.access_token},
                      {"expires_in", expires_in_s},
                      {"session", s.id},
                      {"user", s.user},
                      {"team", s.default_team},
                      {"teams", s.teams},
                      {"admin", s.admin}};
  if (!tokens.refresh_token.empty()) v["refresh_token"] = tokens.refresh_token;
  return v;
}

IdentityService::IdentityService(IdentityConfig config, Controller& controller)
    : config_(std::move(config)), controller_(controller) {
  if (config_.oidc) provider_ = std::make_unique<OidcProvider>(*config_.oidc);
}

nlohmann::json IdentityService::PublicConfig() const {
  nlohmann::json c = {{"oidc", provider_ != nullptr}};
  if (provider_) {
    c["issuer"] = config_.oidc->issuer;
    c["login_url"] = "/auth/login";
  }
  return c;
}

void IdentityService::Audit(const std::string& user, const std::string& action, const std::string& outcome,
                            const std::string& detail) {
  // One line each: what a provider or a caller wrote cannot start a forged line.
  std::string line = detail;
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  controller_.RecordAudit(Actor{user.empty() ? "-" : user, "", Role::kUser}, action, user, outcome, line);
}

bool IdentityService::Admit(const std::string& address, std::map<std::string, std::vector<TimeMs>>& by_address) {
  TimeMs now = controller_.CurrentTime();
  std::lock_guard<std::mutex> lock(mu_);
  if (by_address.size() > kMaxPending) by_address.clear();
  auto& times = by_address[address];
  std::erase_if(times, [&](TimeMs t) { return now - t >= 60 * 1000; });
  if (static_cast<int>(times.size()) >= kStartsPerMinute) return false;
  times.push_back(now);
  return true;
}

std::optional<Actor> IdentityService::ActingFor(const std::string& user,
                                                const std::map<std::string, std::string>& teams, bool admin,
                                                const std::string& default_team, const std::string& team,
                                                std::string* why) {
  std::string acting = team.empty() ? default_team : team;
  if (!admin && !teams.count(acting)) {
    *why = fmt::format("{} is not a member of team {} (member of: {})", user, acting.substr(0, 64), TeamsText(teams));
    return std::nullopt;
  }
  auto role = teams.find(acting);
  Actor who{user, acting,
            admin                                                 ? Role::kAdmin
            : role != teams.end() && role->second == "team-admin" ? Role::kTeamAdmin
                                                                  : Role::kUser};
  for (const auto& [other, r] : teams) {
    if (other != acting) who.other_teams.push_back(other);
  }
  return who;
}

std::optional<Actor> IdentityService::Authenticate(const std::string& token, const std::string& team,
                                                   const std::string& address, std::string* why) {
  if (!IsSessionToken(token)) return AuthenticateProviderToken(token, team, why);
  std::optional<Session> s = controller_.sessions().Authenticate(token, controller_.CurrentTime(), address);
  if (!s) {
    *why = "the session has expired or was revoked: sign in again (gantry login)";
    return std::nullopt;
  }
  return ActingFor(s->user, s->teams, s->admin, s->default_team, team, why);
}

std::optional<Actor> IdentityService::AuthenticateProviderToken(const std::string& token, const std::string& team,
                                                                std::string* why) {
  if (!MayBeProviderToken(token)) {
    *why = "not a token this server takes";
    return std::nullopt;
  }
  auto claims = provider_->VerifyToken(token, config_.bearer_audience, "");
  if (!claims) {
    *why = claims.status().message();
    return std::nullopt;
  }
  auto user = UserNameOfClaims(*claims, config_.username_claim);
  if (!user) {
    *why = user.status().message();
    return std::nullopt;
  }
  std::vector<std::string> groups = GroupsOfClaim(*claims, config_.groups_claim);
  Memberships m = MapGroups(groups, config_.groups);
  if (m.empty()) {
    *why = fmt::format("none of {}'s groups ({}) is mapped to a team in identity.yaml", *user, Join(groups));
    return std::nullopt;
  }
  return ActingFor(*user, m.teams, m.admin, m.teams.begin()->first, team, why);
}

Expected<SignedIn> IdentityService::SignInWith(const ProviderTokens& tokens, const std::string& how,
                                               const std::string& address) {
  const std::string action = "sign-in " + how;
  auto user = UserNameOfClaims(tokens.claims, config_.username_claim);
  if (!user) {
    Audit("", action, "unauthenticated", user.status().message() + " (from " + address + ")");
    return user.status();
  }
  std::vector<std::string> groups = GroupsOfClaim(tokens.claims, config_.groups_claim);
  Memberships m = MapGroups(groups, config_.groups);
  if (m.empty()) {
    std::string why = fmt::format(
        "none of {}'s groups ({}) is mapped to a team: ask your Gantry admin to map one (identity.yaml groups:)", *user,
        groups.empty() ? "none in the " + config_.groups_claim + " claim" : Join(groups));
    Audit(*user, action, "forbidden", why + " (from " + address + ")");
    return Status::Denied("groups", why);
  }
  Session base;
  base.user = *user;
  base.subject = tokens.claims.value("sub", "");
  base.source = "oidc";
  base.teams = m.teams;
  base.admin = m.admin;
  base.default_team = m.teams.begin()->first;
  base.groups = groups;
  base.provider_refresh = tokens.refresh_token;
  SignedIn out;
  out.tokens = controller_.sessions().Create(base, controller_.CurrentTime(), config_.access_ttl_s,
                                             config_.session_lifetime_s, true);
  out.expires_in_s = (out.tokens.session.access_expires_ms - out.tokens.session.created_ms) / 1000;
  controller_.SaveSessions(true);
  Audit(*user, action, "ok",
        fmt::format("session {} from {}; groups [{}]; teams {}{}", out.tokens.session.id, address, Join(groups),
                    TeamsText(m.teams), m.admin ? "; admin" : ""));
  return out;
}

Expected<IdentityService::BrowserStart> IdentityService::StartBrowserSignIn(const std::string& redirect_uri,
                                                                            const std::string& next,
                                                                            const std::string& address) {
  if (!provider_) return Status::Precondition("oidc", "this server has no identity provider (identity.yaml oidc:)");
  if (!Admit(address, starts_by_address_)) {
    return Status{StatusCode::kOverLimit, "too many sign-ins from " + address + ": wait a minute"};
  }
  const std::string state = NewToken().substr(4);
  const std::string nonce = NewToken().substr(4);
  const std::string verifier = NewToken().substr(4) + NewToken().substr(4);
  auto url = provider_->AuthorizationUrl(redirect_uri, state, nonce, PkceChallenge(verifier));
  if (!url) return url.status();
  nlohmann::json sealed = {{"state", state},       {"nonce", nonce},
                           {"verifier", verifier}, {"redirect_uri", redirect_uri},
                           {"next", next},         {"expires_ms", controller_.CurrentTime() + kBrowserSignInMs}};
  return BrowserStart{*url, sealer_.Seal(sealed.dump(), kSignInPurpose)};
}

std::optional<IdentityService::BrowserSignIn> IdentityService::OpenSignInCookie(const std::string& cookie,
                                                                                const std::string& state) const {
  std::optional<std::string> plain = sealer_.Open(cookie, kSignInPurpose);
  if (!plain) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*plain, nullptr, false);
  if (!j.is_object() || j.value("state", "") != state || state.empty() ||
      j.value("expires_ms", int64_t{0}) <= controller_.CurrentTime()) {
    return std::nullopt;
  }
  return BrowserSignIn{j.value("nonce", ""), j.value("verifier", ""), j.value("redirect_uri", ""), j.value("next", "")};
}

Expected<SignedIn> IdentityService::FinishBrowserSignIn(const std::string& code, const std::string& state,
                                                        const std::string& cookie, const std::string& address,
                                                        std::string* next) {
  if (!provider_) return Status::Precondition("oidc", "this server has no identity provider (identity.yaml oidc:)");
  if (!Admit(address, finishes_by_address_)) {
    return Status{StatusCode::kOverLimit, "too many sign-ins from " + address + ": wait a minute"};
  }
  // The browser that started the sign-in must be the one finishing it (no code planted in
  // another person's browser): its cookie holds this state. Each sign-in finishes once.
  std::optional<BrowserSignIn> p = OpenSignInCookie(cookie, state);
  if (p && !SpendSignIn(state)) {
    Audit("", "sign-in oidc", "unauthenticated", "a sign-in finished already, presented again (from " + address + ")");
    return Refused("state", "this sign-in was finished already: start again");
  }
  if (!p) {
    Audit("", "sign-in oidc", "unauthenticated",
          fmt::format("{} (from {})",
                      cookie.empty() ? "no sign-in under way in this browser"
                                     : "a sign-in cookie that "
                                       "is not this sign-in's, was altered or is over 10 minutes old",
                      address));
    return Refused("state", cookie.empty() ? "no sign-in was started in this browser: start again"
                                           : "this sign-in was started in another browser or took over 10 "
                                             "minutes: start again");
  }
  *next = p->next;
  auto tokens = provider_->ExchangeCode(code, p->verifier, p->redirect_uri, p->nonce);
  if (!tokens) {
    Audit("", "sign-in oidc", CodeName(tokens.status().code()), tokens.status().ToString() + " (from " + address + ")");
    return tokens.status();
  }
  return SignInWith(*tokens, "oidc", address);
}

bool IdentityService::AbandonBrowserSignIn(const std::string& state, const std::string& cookie, const std::string& why,
                                           const std::string& address) {
  if (!OpenSignInCookie(cookie, state) || !SpendSignIn(state)) return false;
  Audit("", "sign-in oidc", "unauthenticated", "the provider answered " + why + " (from " + address + ")");
  return true;
}

bool IdentityService::SpendSignIn(const std::string& state) {
  TimeMs now = controller_.CurrentTime();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(used_sign_ins_, [&](const auto& used) { return used.second <= now; });
  if (used_sign_ins_.size() >= kMaxPending * 10) return false;  // a flood of starts: refuse, never forget one
  return used_sign_ins_.emplace(Sha256Hex(state), now + kBrowserSignInMs).second;
}

Expected<DeviceStart> IdentityService::StartDeviceSignIn(const std::string& address) {
  if (!provider_) return Status::Precondition("oidc", "this server has no identity provider (identity.yaml oidc:)");
  if (!Admit(address, starts_by_address_)) {
    return Status{StatusCode::kOverLimit, "too many sign-ins from " + address + ": wait a minute"};
  }
  auto started = provider_->StartDeviceFlow();
  if (!started) return started.status();
  TimeMs now = controller_.CurrentTime();
  std::lock_guard<std::mutex> lock(mu_);
  DropExpired(device_, now);
  if (device_.size() >= kMaxPending) return Status{StatusCode::kOverLimit, "too many sign-ins under way: try again"};
  device_[Sha256Hex(started->device_code)] = {now + started->expires_in_s * 1000LL, now,
                                              std::max(1, started->interval_s)};
  return started;
}

Expected<SignedIn> IdentityService::FinishDeviceSignIn(const std::string& device_code, const std::string& address) {
  if (!provider_) return Status::Precondition("oidc", "this server has no identity provider (identity.yaml oidc:)");
  const std::string key = Sha256Hex(device_code);
  TimeMs now = controller_.CurrentTime();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = device_.find(key);
    if (it == device_.end() || it->second.expires_ms <= now) {
      return Refused("device_code", "no sign-in under way with this device code (expired? run gantry login again)");
    }
    // The provider asks for one poll an interval; a faster caller is told to slow down
    // here, without a request to the provider.
    if (now < it->second.next_poll_ms) return Status{StatusCode::kUnavailable, "slow_down", "device_code"};
    it->second.next_poll_ms = now + it->second.interval_s * 1000LL;
  }
  auto tokens = provider_->PollDeviceFlow(device_code);
  if (!tokens) {
    if (tokens.status().code() == StatusCode::kUnavailable && tokens.status().field() == "device_code") {
      if (tokens.status().message() == "slow_down") {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = device_.find(key); it != device_.end()) it->second.interval_s += 5;
      }
      return tokens.status();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      device_.erase(key);
    }
    Audit("", "sign-in oidc-device", CodeName(tokens.status().code()),
          tokens.status().ToString() + " (from " + address + ")");
    return tokens.status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    device_.erase(key);
  }
  return SignInWith(*tokens, "oidc-device", address);
}

Expected<SignedIn> IdentityService::Refresh(const std::string& refresh_token, const std::string& address) {
  TimeMs now = controller_.CurrentTime();
  std::optional<Session> s = controller_.sessions().FindByRefresh(refresh_token, now);
  if (!s) return RefusedRefresh(refresh_token, now, address);
  // One refresh of a session at a time: a second request with the same token (another tab,
  // at the same moment) would spend the provider's refresh token twice, which providers
  // that detect reuse answer by ending the whole session.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!refreshing_.insert(s->id).second) {
      return Status{StatusCode::kFailedPrecondition,
                    "this session is being refreshed by another tab or command: use its new tokens", "refresh_token"};
    }
  }
  struct Unclaim {
    IdentityService* self;
    std::string id;
    ~Unclaim() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->refreshing_.erase(id);
    }
  } unclaim{this, s->id};
  return RefreshClaimed(*s, now, address);
}

Expected<SignedIn> IdentityService::RefreshClaimed(const Session& claimed, TimeMs now, const std::string& address) {
  const Session* s = &claimed;
  Session renewed = *s;
  if (s->source == "oidc") {
    if (!provider_) return Refused("refresh_token", "this server no longer has an identity provider");
    auto tokens = provider_->Refresh(s->provider_refresh, s->subject);
    if (tokens) {
      renewed.groups = GroupsOfClaim(tokens->claims, config_.groups_claim);
      Memberships m = MapGroups(renewed.groups, config_.groups);
      renewed.teams = m.teams;
      renewed.admin = m.admin;
      renewed.provider_refresh = tokens->refresh_token;
      if (!m.teams.count(renewed.default_team) && !m.empty()) renewed.default_team = m.teams.begin()->first;
    }
    if (!tokens || renewed.teams.empty()) {
      std::string why =
          !tokens ? tokens.status().message()
                  : fmt::format("none of {}'s groups ({}) is mapped to a team any more", s->user, Join(renewed.groups));
      if (tokens || tokens.status().code() == StatusCode::kUnauthenticated) {
        controller_.sessions().Revoke(s->id, "provider", now);  // for good: the provider said no
        controller_.SaveSessions(true);
      }
      Audit(s->user, "refresh oidc", tokens ? "forbidden" : CodeName(tokens.status().code()),
            fmt::format("session {} from {}: {}", s->id, address, why));
      if (!tokens) return tokens.status();
      return Status::Denied("groups", why);
    }
  }
  auto rotated = controller_.sessions().Rotate(renewed, now, config_.access_ttl_s);
  if (!rotated) return Refused("refresh_token", "the session was revoked or refreshed meanwhile: sign in again");
  controller_.SaveSessions(true);
  SignedIn out{std::move(*rotated), 0};
  out.expires_in_s = (out.tokens.session.access_expires_ms - now) / 1000;
  return out;
}

Status IdentityService::RefusedRefresh(const std::string& refresh_token, TimeMs now, const std::string& address) {
  auto spent = controller_.sessions().FindSpentRefresh(refresh_token, now);
  if (!spent) {
    return Refused("refresh_token",
                   "the session has ended or was revoked, or this refresh token is long spent: sign in again");
  }
  const auto& [s, spent_ms] = *spent;
  // A request that crossed another tab's (or command's) refresh of the same session: refused,
  // the session goes on. Later, a spent token is a copy someone kept: the session ends.
  if (now - spent_ms < config_.refresh_reuse_grace_s * 1000) {
    return Status{StatusCode::kFailedPrecondition,
                  "this session was just refreshed by another tab or command: use its new tokens", "refresh_token"};
  }
  controller_.sessions().Revoke(s.id, "refresh-reuse", now);
  controller_.SaveSessions(true);
  Audit(s.user, "refresh", "forbidden",
        fmt::format("session {} from {}: a refresh token spent {} s before was used again; the session is revoked "
                    "(was a copy of it stolen?)",
                    s.id, address, (now - spent_ms) / 1000));
  return Refused("refresh_token",
                 "this refresh token was used already: the session is ended for safety; sign in again");
}

bool IdentityService::SignOut(const std::string& token, const std::string& address) {
  TimeMs now = controller_.CurrentTime();
  std::optional<Session> s = token.rfind("gsr_", 0) == 0 ? controller_.sessions().FindByRefresh(token, now)
                                                         : controller_.sessions().Authenticate(token, now, address);
  if (!s) return false;
  controller_.sessions().Revoke(s->id, s->user, now);
  controller_.SaveSessions(true);
  Audit(s->user, "sign-out", "ok", fmt::format("session {} from {}", s->id, address));
  return true;
}

Expected<SignedIn> IdentityService::LoginNodeSession(const Actor& host, const nlohmann::json& request,
                                                     const std::string& address) {
  const std::string action = "sign-in login-node " + host.user;
  auto text = [&](const char* key) {
    auto it = request.find(key);
    return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string user = text("user");
  auto uid = request.find("uid");
  if (!ValidUserName(user))
    return Status::Invalid("user", "must be a Unix user name (letters, digits, . _ -), never root");
  if (uid == request.end() || !uid->is_number_integer())
    return Status::Invalid("uid", "must be the user's numeric uid");
  std::vector<std::string> groups;
  if (auto g = request.find("groups"); g != request.end() && g->is_array()) {
    for (const auto& name : *g) {
      if (name.is_string() && groups.size() < 1000) groups.push_back(name.get<std::string>());
    }
  }
  if (uid->get<int64_t>() < config_.login_nodes.min_uid) {
    std::string why = fmt::format("uid {} is below login_nodes.min_uid ({}): system accounts get no session",
                                  uid->get<int64_t>(), config_.login_nodes.min_uid);
    Audit(user, action, "forbidden", why);
    return Status::Denied("uid", why);
  }
  // Admin groups count on a login node only where identity.yaml allows it.
  GroupMap grants = config_.login_nodes.groups;
  if (!config_.login_nodes.allow_admin) std::erase_if(grants, [](const auto& g) { return g.second.role == "admin"; });
  Memberships m = MapGroups(groups, grants);
  if (m.empty()) {
    std::string why = fmt::format("none of {}'s Unix groups ({}) is mapped to a team in identity.yaml", user,
                                  groups.empty() ? "none" : Join(groups));
    Audit(user, action, "forbidden", why);
    return Status::Denied("groups", why);
  }
  Session base;
  base.user = user;
  base.subject = fmt::format("unix:{}@{}", uid->get<int64_t>(), host.user);
  base.source = "login-node " + host.user;
  base.teams = m.teams;
  base.admin = m.admin;
  base.default_team = m.teams.begin()->first;
  base.groups = groups;
  SignedIn out;
  out.tokens =
      controller_.sessions().Create(base, controller_.CurrentTime(), config_.access_ttl_s, config_.access_ttl_s, false);
  out.expires_in_s = config_.access_ttl_s;
  controller_.SaveSessions(true);
  Audit(user, action, "ok",
        fmt::format("session {} via {} ({}); groups [{}]; teams {}", out.tokens.session.id, host.user, address,
                    Join(groups), TeamsText(m.teams)));
  return out;
}

Expected<nlohmann::json> IdentityService::ListSessions(const Actor& who) {
  TimeMs now = controller_.CurrentTime();
  nlohmann::json rows = nlohmann::json::array();
  for (const Session& s : controller_.sessions().All()) {
    if (!who.admin() && s.user != who.user) continue;
    rows.push_back(SessionView(s, now));
  }
  return nlohmann::json{{"sessions", rows}};
}

Expected<nlohmann::json> IdentityService::Revoke(const Actor& who, const std::string& id) {
  std::optional<Session> s = controller_.sessions().Find(id);
  // Another person's session is as absent as a made-up id to a non-admin.
  if (!s || (!who.admin() && s->user != who.user)) return Status::NotFound("no session " + id.substr(0, 40));
  controller_.sessions().Revoke(id, who.user, controller_.CurrentTime());
  controller_.SaveSessions(true);
  controller_.RecordAudit(who, "revoke session", id, "ok", "of " + s->user);
  return nlohmann::json{{"revoked", id}, {"user", s->user}};
}

}  // namespace gantry
