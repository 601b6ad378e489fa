// The OpenID Connect provider client: discovery, keys and the token endpoint's grants,
// over cpp-httplib (HTTPS verified against the system's or the configured CA bundle).
#include "identity/oidc_provider.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/sha.h>

#include <chrono>

#include "core/encoding.h"
#include "core/json_fields.h"

namespace gantry {

namespace {

constexpr int64_t kKeysRefetchAfterS = 30;  // a token with an unknown kid fetches keys again at most this often
constexpr int64_t kKeysMaxAgeS = 3600;      // and the keys are fetched again after an hour regardless
constexpr size_t kMaxAnswerBytes = 256 * 1024;

Status Unavailable(const std::string& why) { return {StatusCode::kUnavailable, why, "oidc"}; }
Status Refused(const std::string& field, const std::string& why) { return {StatusCode::kUnauthenticated, why, field}; }

std::string Base64Url(const std::string& bytes) {
  std::string s = Base64Encode(bytes);
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!s.empty() && s.back() == '=') s.pop_back();
  return s;
}

struct UrlParts {
  std::string origin;  // scheme://host[:port]
  std::string target;  // /path?query
};

bool LoopbackHost(const std::string& origin) {
  for (const char* h : {"http://127.0.0.1", "http://localhost", "http://[::1]"}) {
    std::string host(h);
    if (origin == host || origin.rfind(host + ":", 0) == 0) return true;
  }
  return false;
}

// Splits an endpoint URL; HTTPS only, except plain HTTP to this machine (a test provider).
Expected<UrlParts> SplitUrl(const std::string& what, const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return Status::Invalid(what, "not a URL: '" + url.substr(0, 100) + "'");
  size_t path = url.find('/', scheme_end + 3);
  UrlParts parts{url.substr(0, path), path == std::string::npos ? "/" : url.substr(path)};
  if (parts.origin.rfind("https://", 0) != 0 && !LoopbackHost(parts.origin)) {
    return Status::Invalid(
        what, "must be an https:// URL (plain http only to 127.0.0.1 or localhost): '" + url.substr(0, 100) + "'");
  }
  if (parts.origin.find_first_of("@ \t\r\n") != std::string::npos) {
    return Status::Invalid(what, "must not carry credentials or spaces: '" + url.substr(0, 100) + "'");
  }
  return parts;
}

std::string FormBody(const std::vector<std::pair<std::string, std::string>>& form) {
  std::string body;
  for (const auto& [k, v] : form) body += (body.empty() ? "" : "&") + UrlEncode(k) + "=" + UrlEncode(v);
  return body;
}

std::unique_ptr<httplib::Client> ClientFor(const OidcSettings& s, const std::string& origin) {
  auto cli = std::make_unique<httplib::Client>(origin);
  cli->set_connection_timeout(s.timeout_s, 0);
  cli->set_read_timeout(s.timeout_s, 0);
  cli->set_write_timeout(s.timeout_s, 0);
  if (!s.ca_file.empty()) cli->set_ca_cert_path(s.ca_file.c_str());
  cli->enable_server_certificate_verification(true);
  cli->set_follow_location(false);
  return cli;
}

Expected<nlohmann::json> ParseAnswer(const std::string& what, const httplib::Result& r) {
  if (!r)
    return Unavailable(
        fmt::format("the identity provider's {} did not answer: {}", what, httplib::to_string(r.error())));
  if (r->body.size() > kMaxAnswerBytes) return Unavailable("the identity provider's " + what + " answer is too large");
  nlohmann::json doc = nlohmann::json::parse(r->body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Unavailable(
        fmt::format("the identity provider's {} answered HTTP {} without a JSON object", what, r->status));
  }
  return doc;
}

}  // namespace

std::string PkceChallenge(const std::string& verifier) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(verifier.data()), verifier.size(), digest);
  return Base64Url(std::string(reinterpret_cast<const char*>(digest), sizeof digest));
}

OidcProvider::OidcProvider(OidcSettings settings, std::function<int64_t()> now_s)
    : settings_(std::move(settings)), now_s_(std::move(now_s)) {
  if (!now_s_) {
    now_s_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
}

Status OidcProvider::Discover() {
  std::lock_guard<std::mutex> lock(mu_);
  return DiscoverLocked();
}

Status OidcProvider::DiscoverLocked() {
  if (metadata_ && now_s_() - keys_fetched_s_ < kKeysMaxAgeS) return Status::Ok();
  if (!metadata_) {
    std::string issuer = settings_.issuer;
    while (!issuer.empty() && issuer.back() == '/') issuer.pop_back();
    auto url = SplitUrl("oidc.issuer", issuer + "/.well-known/openid-configuration");
    if (!url) return url.status();
    auto doc = ParseAnswer("discovery document", ClientFor(settings_, url->origin)->Get(url->target));
    if (!doc) return doc.status();
    if (StringAt(*doc, "issuer") != settings_.issuer) {
      return Unavailable(
          fmt::format("the provider's discovery document names issuer '{}', not '{}' (oidc.issuer must "
                      "be exactly the provider's)",
                      StringAt(*doc, "issuer").substr(0, 200), settings_.issuer));
    }
    Metadata m;
    m.authorization_endpoint = StringAt(*doc, "authorization_endpoint");
    m.token_endpoint = StringAt(*doc, "token_endpoint");
    m.device_authorization_endpoint = StringAt(*doc, "device_authorization_endpoint");
    m.userinfo_endpoint = StringAt(*doc, "userinfo_endpoint");
    m.jwks_uri = StringAt(*doc, "jwks_uri");
    m.end_session_endpoint = StringAt(*doc, "end_session_endpoint");
    for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"token_endpoint", m.token_endpoint},
                                      {"jwks_uri", m.jwks_uri},
                                      {"authorization_endpoint", m.authorization_endpoint}}) {
      if (value.empty()) return Unavailable(std::string("the provider's discovery document has no ") + name);
      if (auto ok = SplitUrl(std::string("discovery.") + name, value); !ok) return ok.status();
    }
    auto methods = doc->find("token_endpoint_auth_methods_supported");
    if (methods != doc->end() && methods->is_array()) {
      bool basic = false, post = false;
      for (const auto& m2 : *methods) {
        basic = basic || m2 == "client_secret_basic";
        post = post || m2 == "client_secret_post";
      }
      m.secret_in_body = !basic && post;
    }
    metadata_ = m;
    return FetchKeysLocked();
  }
  // Keys an hour old: fetched again; while the provider cannot be reached, the keys held go
  // on (asked again a minute later), so a provider's outage does not sign everyone out.
  Status fetched = FetchKeysLocked();
  if (!fetched.ok() && keys_.size() > 0) {
    keys_fetched_s_ = now_s_() - kKeysMaxAgeS + 60;
    return Status::Ok();
  }
  return fetched;
}

Status OidcProvider::FetchKeysLocked() {
  auto url = SplitUrl("discovery.jwks_uri", metadata_->jwks_uri);
  if (!url) return url.status();
  httplib::Result r = ClientFor(settings_, url->origin)->Get(url->target);
  if (!r || r->status != 200) {
    return Unavailable("the provider's keys (jwks_uri) could not be fetched: " +
                       (r ? fmt::format("HTTP {}", r->status) : httplib::to_string(r.error())));
  }
  auto keys = JwksKeys::FromJson(r->body);
  if (!keys) return Unavailable("the provider's keys (jwks_uri): " + keys.status().message());
  keys_ = std::move(*keys);
  keys_fetched_s_ = now_s_();
  return Status::Ok();
}

Expected<nlohmann::json> OidcProvider::VerifyIdToken(const std::string& token, const std::string& nonce) {
  return VerifyToken(token, settings_.client_id, nonce);
}

Expected<nlohmann::json> OidcProvider::VerifyToken(const std::string& token, const std::string& audience,
                                                   const std::string& nonce) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = DiscoverLocked(); !s.ok()) return s;
  std::string kid = JwtKeyId(token);
  // A key id not seen yet: the provider may have rotated its keys since the last fetch.
  if (!kid.empty() && !keys_.HasKeyId(kid) && now_s_() - keys_fetched_s_ >= kKeysRefetchAfterS) {
    if (Status s = FetchKeysLocked(); !s.ok()) return s;
  }
  JwtExpectations want{settings_.issuer, audience, nonce, now_s_(), settings_.skew_s};
  return VerifyJwt(token, keys_, want);
}

Expected<std::string> OidcProvider::AuthorizationUrl(const std::string& redirect_uri, const std::string& state,
                                                     const std::string& nonce, const std::string& code_challenge) {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = DiscoverLocked(); !s.ok()) return s;
    endpoint = metadata_->authorization_endpoint;
  }
  std::string scopes;
  for (const std::string& s : settings_.scopes) scopes += (scopes.empty() ? "" : " ") + s;
  return endpoint + (endpoint.find('?') == std::string::npos ? "?" : "&") +
         FormBody({{"response_type", "code"},
                   {"client_id", settings_.client_id},
                   {"redirect_uri", redirect_uri},
                   {"scope", scopes},
                   {"state", state},
                   {"nonce", nonce},
                   {"code_challenge", code_challenge},
                   {"code_challenge_method", "S256"}});
}

Expected<nlohmann::json> OidcProvider::PostForm(const std::string& url,
                                                std::vector<std::pair<std::string, std::string>> form,
                                                int* http_status) {
  bool secret_in_body = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    secret_in_body = metadata_ && metadata_->secret_in_body;
  }
  auto parts = SplitUrl("oidc", url);
  if (!parts) return parts.status();
  auto cli = ClientFor(settings_, parts->origin);
  if (secret_in_body || settings_.client_secret.empty()) {
    form.emplace_back("client_id", settings_.client_id);
    if (!settings_.client_secret.empty()) form.emplace_back("client_secret", settings_.client_secret);
  } else {  // client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1)
    cli->set_basic_auth(UrlEncode(settings_.client_id).c_str(), UrlEncode(settings_.client_secret).c_str());
  }
  httplib::Result r = cli->Post(parts->target, FormBody(form), "application/x-www-form-urlencoded");
  auto doc = ParseAnswer("token endpoint", r);
  if (doc && http_status) *http_status = r->status;
  return doc;
}

Expected<ProviderTokens> OidcProvider::TokensOf(const nlohmann::json& answer, const std::string& nonce,
                                                bool id_token_required) {
  ProviderTokens t;
  t.id_token = StringAt(answer, "id_token");
  t.access_token = StringAt(answer, "access_token");
  t.refresh_token = StringAt(answer, "refresh_token");
  if (answer.contains("expires_in") && answer["expires_in"].is_number_integer()) {
    t.expires_in_s = answer["expires_in"].get<int64_t>();
  }
  if (t.id_token.empty()) {
    if (id_token_required)
      return Refused("id_token", "the provider answered without an ID token (is `openid` a scope?)");
    return t;
  }
  auto claims = VerifyIdToken(t.id_token, nonce);
  if (!claims) return claims.status();
  t.claims = std::move(*claims);
  return t;
}

// A token endpoint's refusal ({"error": ..., "error_description": ...}) as a Status.
static Status TokenRefusal(const nlohmann::json& answer, int http_status) {
  std::string error = StringAt(answer, "error");
  std::string description = StringAt(answer, "error_description");
  if (error.empty()) return Unavailable(fmt::format("the provider's token endpoint answered HTTP {}", http_status));
  return Refused("oidc", "the provider refused: " + error.substr(0, 80) +
                             (description.empty() ? "" : " (" + description.substr(0, 200) + ")"));
}

Expected<ProviderTokens> OidcProvider::ExchangeCode(const std::string& code, const std::string& code_verifier,
                                                    const std::string& redirect_uri, const std::string& nonce) {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = DiscoverLocked(); !s.ok()) return s;
    endpoint = metadata_->token_endpoint;
  }
  int status = 0;
  auto answer = PostForm(endpoint,
                         {{"grant_type", "authorization_code"},
                          {"code", code},
                          {"redirect_uri", redirect_uri},
                          {"code_verifier", code_verifier}},
                         &status);
  if (!answer) return answer.status();
  if (status != 200) return TokenRefusal(*answer, status);
  return TokensOf(*answer, nonce, true);
}

Expected<nlohmann::json> OidcProvider::UserInfo(const std::string& access_token) {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint = metadata_ ? metadata_->userinfo_endpoint : "";
  }
  if (endpoint.empty()) return Refused("oidc", "the provider gave no ID token on refresh and has no userinfo endpoint");
  auto parts = SplitUrl("discovery.userinfo_endpoint", endpoint);
  if (!parts) return parts.status();
  auto cli = ClientFor(settings_, parts->origin);
  cli->set_bearer_token_auth(access_token.c_str());
  httplib::Result r = cli->Get(parts->target);
  if (r && r->status == 401) return Refused("oidc", "the provider no longer accepts this sign-in (userinfo: 401)");
  return ParseAnswer("userinfo endpoint", r);
}

Expected<ProviderTokens> OidcProvider::Refresh(const std::string& refresh_token, const std::string& subject) {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = DiscoverLocked(); !s.ok()) return s;
    endpoint = metadata_->token_endpoint;
  }
  int status = 0;
  auto answer = PostForm(endpoint, {{"grant_type", "refresh_token"}, {"refresh_token", refresh_token}}, &status);
  if (!answer) return answer.status();
  if (status != 200) return TokenRefusal(*answer, status);
  auto tokens = TokensOf(*answer, "", false);
  if (!tokens) return tokens.status();
  if (tokens->id_token.empty()) {  // some providers answer a refresh with tokens but no ID token
    auto info = UserInfo(tokens->access_token);
    if (!info) return info.status();
    tokens->claims = std::move(*info);
  }
  if (StringAt(tokens->claims, "sub") != subject) {
    return Refused("sub", "the provider's refreshed identity is another subject");
  }
  if (tokens->refresh_token.empty()) tokens->refresh_token = refresh_token;  // not rotated: the same again
  return tokens;
}

Expected<DeviceStart> OidcProvider::StartDeviceFlow() {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = DiscoverLocked(); !s.ok()) return s;
    endpoint = metadata_->device_authorization_endpoint;
  }
  if (endpoint.empty()) {
    return Status::Precondition("oidc",
                                "the identity provider offers no device authorization grant "
                                "(device_authorization_endpoint): sign in with the dashboard");
  }
  std::string scopes;
  for (const std::string& s : settings_.scopes) scopes += (scopes.empty() ? "" : " ") + s;
  int status = 0;
  auto answer = PostForm(endpoint, {{"scope", scopes}}, &status);
  if (!answer) return answer.status();
  if (status != 200) return TokenRefusal(*answer, status);
  DeviceStart d;
  d.device_code = StringAt(*answer, "device_code");
  d.user_code = StringAt(*answer, "user_code");
  d.verification_uri = StringAt(*answer, "verification_uri");
  d.verification_uri_complete = StringAt(*answer, "verification_uri_complete");
  if (answer->contains("interval") && (*answer)["interval"].is_number_integer()) d.interval_s = (*answer)["interval"];
  if (answer->contains("expires_in") && (*answer)["expires_in"].is_number_integer())
    d.expires_in_s = (*answer)["expires_in"];
  if (d.device_code.empty() || d.user_code.empty() || d.verification_uri.empty()) {
    return Unavailable("the provider's device authorization answer lacks device_code, user_code or verification_uri");
  }
  return d;
}

Expected<ProviderTokens> OidcProvider::PollDeviceFlow(const std::string& device_code) {
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = DiscoverLocked(); !s.ok()) return s;
    endpoint = metadata_->token_endpoint;
  }
  int status = 0;
  auto answer =
      PostForm(endpoint, {{"grant_type", "urn:ietf:params:oauth:grant-type:device_code"}, {"device_code", device_code}},
               &status);
  if (!answer) return answer.status();
  if (status != 200) {
    std::string error = StringAt(*answer, "error");
    if (error == "authorization_pending" || error == "slow_down") {
      return Status{StatusCode::kUnavailable, error, "device_code"};
    }
    return TokenRefusal(*answer, status);
  }
  return TokensOf(*answer, "", true);
}

std::string OidcProvider::EndSessionUrl(const std::string& id_token_hint, const std::string& return_to) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!metadata_ || metadata_->end_session_endpoint.empty()) return "";
  std::vector<std::pair<std::string, std::string>> q = {{"client_id", settings_.client_id}};
  if (!id_token_hint.empty()) q.emplace_back("id_token_hint", id_token_hint);
  if (!return_to.empty()) q.emplace_back("post_logout_redirect_uri", return_to);
  const std::string& e = metadata_->end_session_endpoint;
  return e + (e.find('?') == std::string::npos ? "?" : "&") + FormBody(q);
}

}  // namespace gantry
