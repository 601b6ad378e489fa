// A relying party's client of one OpenID Connect provider (Keycloak, Okta, Entra ID, Google,
// Dex...): its discovery document, its signing keys (fetched again when a token names a key
// it has not seen: providers rotate keys), and the token endpoint's grants Gantry uses:
// the authorization code with PKCE (the dashboard), the device authorization grant (the
// CLI), and refresh (membership follows the provider at each refresh).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "identity/jwt_verify.h"

namespace gantry {

struct OidcSettings {
  std::string issuer;  // exactly as the provider's tokens carry it (https://idp/realms/acme)
  std::string client_id;
  std::string client_secret;  // a confidential client's; the server alone holds it
  std::string ca_file;        // PEM bundle the provider's certificate chains to (default: the system's)
  std::vector<std::string> scopes = {"openid", "profile", "email", "groups", "offline_access"};
  int skew_s = 60;     // clock difference tolerated on a token's times
  int timeout_s = 10;  // each call to the provider
};

// What the token endpoint gave, with the ID token's checked claims.
struct ProviderTokens {
  std::string id_token;
  std::string access_token;
  std::string refresh_token;  // empty when the provider gave none
  int64_t expires_in_s = 0;
  nlohmann::json claims;  // the ID token's (or, on a refresh without one, userinfo's)
};

// A device authorization grant under way: the user opens `verification_uri` and types
// `user_code`; `device_code` is what the token endpoint is polled with.
struct DeviceStart {
  std::string device_code;
  std::string user_code;
  std::string verification_uri;
  std::string verification_uri_complete;
  int interval_s = 5;
  int expires_in_s = 600;
};

class OidcProvider {
 public:
  // `now_s`: the clock tokens are checked against (tests move it).
  explicit OidcProvider(OidcSettings settings, std::function<int64_t()> now_s = {});

  const OidcSettings& settings() const { return settings_; }
  // Fetches the discovery document and the keys when not yet done (a provider that is down
  // when the server starts is asked again at the next sign-in).
  Status Discover();

  // Where to send a browser for the code flow: PKCE S256 with `code_challenge`, `state`
  // and `nonce` bound to the sign-in.
  Expected<std::string> AuthorizationUrl(const std::string& redirect_uri, const std::string& state,
                                         const std::string& nonce, const std::string& code_challenge);
  Expected<ProviderTokens> ExchangeCode(const std::string& code, const std::string& code_verifier,
                                        const std::string& redirect_uri, const std::string& nonce);
  // A refresh at the provider: fails once the provider no longer honours the grant (the
  // user was disabled, signed out everywhere, or the token expired). `subject` must match.
  Expected<ProviderTokens> Refresh(const std::string& refresh_token, const std::string& subject);
  Expected<DeviceStart> StartDeviceFlow();
  // kUnavailable (field "device_code", message "authorization_pending" or "slow_down") while
  // the user has not finished; kUnauthenticated once refused or expired.
  Expected<ProviderTokens> PollDeviceFlow(const std::string& device_code);
  // An ID token's claims, checked against the provider's keys, issuer, this client as
  // audience, times, and `nonce` when given.
  Expected<nlohmann::json> VerifyIdToken(const std::string& token, const std::string& nonce);
  // A JWT the provider issued for `audience` (an access token presented as a bearer token).
  Expected<nlohmann::json> VerifyToken(const std::string& token, const std::string& audience, const std::string& nonce);
  // Where a browser signs out at the provider ("" when it publishes none).
  std::string EndSessionUrl(const std::string& id_token_hint, const std::string& return_to);

 private:
  struct Metadata {
    std::string authorization_endpoint;
    std::string token_endpoint;
    std::string device_authorization_endpoint;
    std::string userinfo_endpoint;
    std::string jwks_uri;
    std::string end_session_endpoint;
    bool secret_in_body = false;  // client_secret_post where the provider takes no Basic
  };
  Status DiscoverLocked();
  Status FetchKeysLocked();
  // POSTs a form to `url` (the client authenticated as the provider asks) and parses the JSON.
  Expected<nlohmann::json> PostForm(const std::string& url, std::vector<std::pair<std::string, std::string>> form,
                                    int* http_status);
  Expected<ProviderTokens> TokensOf(const nlohmann::json& answer, const std::string& nonce, bool id_token_required);
  Expected<nlohmann::json> UserInfo(const std::string& access_token);

  OidcSettings settings_;
  std::function<int64_t()> now_s_;
  std::mutex mu_;
  std::optional<Metadata> metadata_;
  JwksKeys keys_;
  int64_t keys_fetched_s_ = -1'000'000;
};

// The PKCE S256 challenge of a code verifier: base64url(SHA-256(verifier)), no padding.
std::string PkceChallenge(const std::string& verifier);

}  // namespace gantry
