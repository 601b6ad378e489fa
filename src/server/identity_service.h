// Sign-in for people: an OpenID Connect provider (the dashboard's authorization code flow
// with PKCE, the CLI's device authorization grant, refresh at the provider so membership
// follows its groups), login nodes vouching for their Unix users, and Gantry's sessions
// both give. Every sign-in and every refusal is audited with its reason.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "identity/identity_config.h"
#include "identity/oidc_provider.h"
#include "identity/sealed_box.h"
#include "server/controller.h"
#include "server/sessions.h"
#include "state/auth.h"

namespace gantry {

// A sign-in's answer: the session's tokens and who it is for.
struct SignedIn {
  SessionTokens tokens;
  int64_t expires_in_s = 0;     // of the access token
  nlohmann::json View() const;  // {access_token, refresh_token?, expires_in, user, team, teams, admin}
};

class IdentityService {
 public:
  IdentityService(IdentityConfig config, Controller& controller);

  const IdentityConfig& config() const { return config_; }
  bool has_oidc() const { return provider_ != nullptr; }
  // What /v1/auth/config tells the dashboard and the CLI (no secrets).
  nlohmann::json PublicConfig() const;

  // Whether a bearer token is one of Gantry's session tokens (cheap: its prefix), or may be
  // one of the provider's JWTs this server takes (oidc.bearer_audience).
  static bool IsSessionToken(const std::string& token) { return token.rfind("gsa_", 0) == 0; }
  bool MayBeProviderToken(const std::string& token) const {
    return provider_ && !config_.bearer_audience.empty() && token.rfind("eyJ", 0) == 0;
  }
  // The person a session's access token belongs to, acting for `team` (their default team
  // when empty), or null with the reason in `why`.
  std::optional<Actor> Authenticate(const std::string& token, const std::string& team, const std::string& address,
                                    std::string* why);

  // The dashboard: where to send the browser, and the cookie that binds the sign-in to
  // that browser: what the callback needs (state, nonce, PKCE verifier, where to go next),
  // sealed under this process's key, so the server keeps nothing per sign-in under way.
  struct BrowserStart {
    std::string url;
    std::string cookie;
  };
  Expected<BrowserStart> StartBrowserSignIn(const std::string& redirect_uri, const std::string& next,
                                            const std::string& address);
  // The provider sent the browser back: `next` gets where the browser was going.
  Expected<SignedIn> FinishBrowserSignIn(const std::string& code, const std::string& state, const std::string& cookie,
                                         const std::string& address, std::string* next);

  // The provider sent the browser back with an error (`why`): when that browser's cookie
  // holds that sign-in it is audited; anyone can call /auth/callback, so others are not.
  // True when it was (the page may then show the provider's words).
  bool AbandonBrowserSignIn(const std::string& state, const std::string& cookie, const std::string& why,
                            const std::string& address);

  // The CLI's device grant: started, then polled until the user finished at the provider.
  Expected<DeviceStart> StartDeviceSignIn(const std::string& address);
  Expected<SignedIn> FinishDeviceSignIn(const std::string& device_code, const std::string& address);

  // New tokens for a refresh token, after the provider (for its sessions) still vouches
  // for the person and their groups still give a team.
  Expected<SignedIn> Refresh(const std::string& refresh_token, const std::string& address);
  // Ends the session an access or refresh token belongs to (false: none).
  bool SignOut(const std::string& token, const std::string& address);

  // A login node (its host token, role login-node) asks for a session for one of its Unix
  // users, whom it identified by the kernel's peer credentials.
  Expected<SignedIn> LoginNodeSession(const Actor& host, const nlohmann::json& request, const std::string& address);

  // `gantry tokens list|revoke`: admins see and revoke every session, people their own.
  Expected<nlohmann::json> ListSessions(const Actor& who);
  Expected<nlohmann::json> Revoke(const Actor& who, const std::string& id);

 private:
  // The person a provider's JWT (oidc.bearer_audience) names, acting for `team`.
  std::optional<Actor> AuthenticateProviderToken(const std::string& token, const std::string& team, std::string* why);
  // The person `user` with `teams`, acting for `team` (their default when empty).
  static std::optional<Actor> ActingFor(const std::string& user, const std::map<std::string, std::string>& teams,
                                        bool admin, const std::string& default_team, const std::string& team,
                                        std::string* why);
  // A session for the person the provider's claims name, or the refusal (audited).
  Expected<SignedIn> SignInWith(const ProviderTokens& tokens, const std::string& how, const std::string& address);
  // Why a refresh token that opens no session is refused; a spent one used again past a
  // short grace ends its session (audited).
  Status RefusedRefresh(const std::string& refresh_token, TimeMs now, const std::string& address);
  // The refresh of a session this caller alone holds now (see Refresh).
  Expected<SignedIn> RefreshClaimed(const Session& claimed, TimeMs now, const std::string& address);
  // Marks a sealed sign-in as finished; false when it was already (or too many are kept).
  bool SpendSignIn(const std::string& state);
  // A caller may start, and finish, so many sign-ins a minute (each finish costs the
  // provider a request and the audit log a row).
  bool Admit(const std::string& address, std::map<std::string, std::vector<TimeMs>>& by_address);
  void Audit(const std::string& user, const std::string& action, const std::string& outcome, const std::string& detail);

  IdentityConfig config_;
  Controller& controller_;
  std::unique_ptr<OidcProvider> provider_;

  // What a browser's sign-in cookie holds, when it opens, is this process's and has not
  // expired; `state` must be the one the provider sent back.
  struct BrowserSignIn {
    std::string nonce;
    std::string verifier;
    std::string redirect_uri;
    std::string next;
  };
  std::optional<BrowserSignIn> OpenSignInCookie(const std::string& cookie, const std::string& state) const;
  struct PendingDevice {
    TimeMs expires_ms = 0;
    TimeMs next_poll_ms = 0;
    int interval_s = 5;
  };
  std::mutex mu_;
  SealedBox sealer_;                             // the browser sign-in cookies
  std::map<std::string, PendingDevice> device_;  // by SHA-256 of the device code
  std::map<std::string, std::vector<TimeMs>> starts_by_address_;
  std::map<std::string, std::vector<TimeMs>> finishes_by_address_;
  std::map<std::string, TimeMs> used_sign_ins_;  // states of sealed sign-ins already finished, until they expire
  std::set<std::string> refreshing_;             // sessions whose refresh is at the provider now
};

}  // namespace gantry
