// JWT checks for OpenID Connect: cjose verifies the signature with the provider's key; this
// file chooses the key and the algorithms allowed, and checks the claims.
#include "identity/jwt_verify.h"

#include <cjose/cjose.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "core/json_fields.h"

namespace gantry {

namespace {

constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kMaxJwksKeys = 64;

Status Refused(const std::string& why) { return {StatusCode::kUnauthenticated, why, "token"}; }

// Asymmetric signature algorithms only, by the key type each needs. HS* would verify
// with a secret shared with the provider, and with a public key as that secret a forger
// could sign; "none" is no signature at all.
const char* KeyTypeOfAlg(const std::string& alg) {
  static constexpr std::array<const char*, 6> kRsa = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"};
  static constexpr std::array<const char*, 3> kEc = {"ES256", "ES384", "ES512"};
  if (std::find(kRsa.begin(), kRsa.end(), alg) != kRsa.end()) return "RSA";
  if (std::find(kEc.begin(), kEc.end(), alg) != kEc.end()) return "EC";
  return nullptr;
}

struct JwsDeleter {
  void operator()(cjose_jws_t* jws) const { cjose_jws_release(jws); }
};
using JwsPtr = std::unique_ptr<cjose_jws_t, JwsDeleter>;

// Whether `part` is base64url without padding, of a length base64 can have. cjose's decoder
// aborts the process (an assert) on some malformed input, so nothing else reaches it.
bool Base64UrlShaped(std::string_view part) {
  if (part.size() % 4 == 1) return false;
  return std::all_of(part.begin(), part.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

// Three base64url parts, the first two not empty: what a compact JWS is.
bool CompactJwsShape(const std::string& token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  size_t header_end = token.find('.');
  size_t claims_end = header_end == std::string::npos ? header_end : token.find('.', header_end + 1);
  if (claims_end == std::string::npos || header_end == 0 || claims_end == header_end + 1) return false;
  std::string_view t(token);
  return Base64UrlShaped(t.substr(0, header_end)) &&
         Base64UrlShaped(t.substr(header_end + 1, claims_end - header_end - 1)) &&
         Base64UrlShaped(t.substr(claims_end + 1));
}

// The members of a public JWK that cjose decodes are well-formed base64url (see above).
bool JwkShaped(const nlohmann::json& key, const std::string& kty) {
  static constexpr std::array<const char*, 2> kRsa = {"n", "e"};
  static constexpr std::array<const char*, 2> kEc = {"x", "y"};
  for (const char* m : kty == "RSA" ? kRsa : kEc) {
    auto it = key.find(m);
    if (it == key.end() || !it->is_string() || it->get<std::string>().empty() ||
        !Base64UrlShaped(it->get<std::string>())) {
      return false;
    }
  }
  if (kty == "EC") {
    std::string crv = StringAt(key, "crv");
    if (crv != "P-256" && crv != "P-384" && crv != "P-521") return false;
  }
  return true;
}

JwsPtr ImportJws(const std::string& token) {
  if (!CompactJwsShape(token)) return nullptr;
  cjose_err err;
  return JwsPtr(cjose_jws_import(token.data(), token.size(), &err));
}

std::string HeaderField(cjose_jws_t* jws, const char* name) {
  cjose_header_t* header = cjose_jws_get_protected(jws);
  if (!header) return "";
  cjose_err err;
  const char* value = cjose_header_get(header, name, &err);
  return value ? value : "";
}

// The claim `name` as a whole number of seconds; false when absent or not a number.
bool SecondsClaim(const nlohmann::json& claims, const char* name, int64_t* out) {
  auto it = claims.find(name);
  if (it == claims.end() || !it->is_number()) return false;
  if (it->is_number_float()) {
    double v = it->get<double>();
    if (!(v > -9e15 && v < 9e15)) return false;  // NaN or past any time: no time at all
    *out = static_cast<int64_t>(v);
  } else if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return false;
  } else {
    *out = it->get<int64_t>();
  }
  return true;
}

Status CheckAudience(const nlohmann::json& claims, const std::string& audience) {
  auto aud = claims.find("aud");
  std::vector<std::string> audiences;
  if (aud != claims.end() && aud->is_string()) {
    audiences.push_back(aud->get<std::string>());
  } else if (aud != claims.end() && aud->is_array()) {
    for (const auto& a : *aud) {
      if (a.is_string()) audiences.push_back(a.get<std::string>());
    }
  }
  if (std::find(audiences.begin(), audiences.end(), audience) == audiences.end()) {
    return Refused("the token is for another audience (aud does not name " + audience + ")");
  }
  auto azp = claims.find("azp");
  if (audiences.size() > 1 && (azp == claims.end() || !azp->is_string() || *azp != audience)) {
    return Refused("the token names several audiences and its authorized party (azp) is not " + audience);
  }
  if (azp != claims.end() && (!azp->is_string() || *azp != audience)) {
    return Refused("the token was issued to another client (azp)");
  }
  return Status::Ok();
}

Status CheckTimes(const nlohmann::json& claims, const JwtExpectations& want) {
  int64_t exp = 0, iat = 0, nbf = 0;
  if (!SecondsClaim(claims, "exp", &exp)) return Refused("the token has no expiry (exp)");
  if (exp <= want.now_s - want.skew_s) return Refused("the token has expired (exp)");
  if (!SecondsClaim(claims, "iat", &iat)) return Refused("the token has no issue time (iat)");
  if (iat > want.now_s + want.skew_s) return Refused("the token is issued in the future (iat)");
  if (SecondsClaim(claims, "nbf", &nbf) && nbf > want.now_s + want.skew_s) {
    return Refused("the token is not valid yet (nbf)");
  } else if (claims.contains("nbf") && !claims["nbf"].is_number()) {
    return Refused("the token's not-before (nbf) is not a time");
  }
  return Status::Ok();
}

Status CheckClaims(const nlohmann::json& claims, const JwtExpectations& want) {
  if (!claims.is_object()) return Refused("the token's payload is not a JSON object");
  auto iss = claims.find("iss");
  if (iss == claims.end() || !iss->is_string() || *iss != want.issuer) {
    return Refused("the token is from another issuer (iss is not " + want.issuer + ")");
  }
  auto sub = claims.find("sub");
  if (sub == claims.end() || !sub->is_string() || sub->get<std::string>().empty()) {
    return Refused("the token names no subject (sub)");
  }
  if (Status s = CheckAudience(claims, want.audience); !s.ok()) return s;
  if (Status s = CheckTimes(claims, want); !s.ok()) return s;
  if (!want.nonce.empty()) {
    auto nonce = claims.find("nonce");
    if (nonce == claims.end() || !nonce->is_string() || *nonce != want.nonce) {
      return Refused("the token is not from this sign-in (nonce)");
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<JwksKeys> JwksKeys::FromJson(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return Status::Invalid("jwks", "not a JSON Web Key Set (an object with a `keys` list)");
  }
  JwksKeys out;
  for (const auto& key : doc["keys"]) {
    if (out.keys_.size() >= kMaxJwksKeys) break;
    if (!key.is_object()) continue;
    std::string kty = StringAt(key, "kty");
    if (kty != "RSA" && kty != "EC") continue;                                  // oct and others: no
    if (key.contains("use") && key["use"] != "sig") continue;                   // encryption keys
    if (key.contains("d") || key.contains("p") || key.contains("k")) continue;  // private parts
    std::string alg = key.contains("alg") && key["alg"].is_string() ? key["alg"].get<std::string>() : "";
    if (!alg.empty() && (!KeyTypeOfAlg(alg) || KeyTypeOfAlg(alg) != kty)) continue;
    if (!JwkShaped(key, kty)) continue;
    std::string json = key.dump();
    cjose_err err;
    cjose_jwk_t* jwk = cjose_jwk_import(json.data(), json.size(), &err);
    if (!jwk) continue;
    Key k;
    k.jwk = std::shared_ptr<void>(jwk, [](void* p) { cjose_jwk_release(static_cast<cjose_jwk_t*>(p)); });
    k.kid = key.contains("kid") && key["kid"].is_string() ? key["kid"].get<std::string>() : "";
    k.kty = kty;
    k.alg = alg;
    out.keys_.push_back(std::move(k));
  }
  return out;
}

bool JwksKeys::HasKeyId(const std::string& kid) const {
  return std::any_of(keys_.begin(), keys_.end(), [&](const Key& k) { return k.kid == kid; });
}

std::string JwtKeyId(const std::string& token) {
  JwsPtr jws = ImportJws(token);
  return jws ? HeaderField(jws.get(), CJOSE_HDR_KID) : "";
}

Expected<nlohmann::json> VerifyJwt(const std::string& token, const JwksKeys& keys, const JwtExpectations& want) {
  if (token.size() > kMaxTokenBytes) return Refused("the token is too long");
  JwsPtr jws = ImportJws(token);
  if (!jws) return Refused("not a signed JWT (three base64url parts: header, claims, signature)");
  const std::string alg = HeaderField(jws.get(), CJOSE_HDR_ALG);
  const char* kty = KeyTypeOfAlg(alg);
  if (!kty) return Refused("the token's algorithm '" + alg.substr(0, 16) + "' is not one a provider signs with");
  cjose_header_t* header = cjose_jws_get_protected(jws.get());
  cjose_err err;
  // Critical extensions (of any JSON type) are none Gantry understands; a type other than a
  // JWT's (a logout token, an encrypted one) is not an identity.
  if (char* crit = header ? cjose_header_get_raw(header, "crit", &err) : nullptr) {
    cjose_get_dealloc()(crit);
    return Refused("the token has critical header extensions");
  }
  const std::string typ = HeaderField(jws.get(), "typ");
  if (!typ.empty() && typ != "JWT" && typ != "jwt" && typ != "at+jwt" && typ != "application/at+jwt") {
    return Refused("the token is a '" + typ.substr(0, 32) + "', not an identity or access token");
  }
  const std::string kid = HeaderField(jws.get(), CJOSE_HDR_KID);
  bool tried = false;
  bool verified = false;
  for (const JwksKeys::Key& key : keys.keys()) {
    if (!kid.empty() && key.kid != kid) continue;
    if (key.kty != kty || (!key.alg.empty() && key.alg != alg)) continue;
    tried = true;
    if (cjose_jws_verify(jws.get(), static_cast<const cjose_jwk_t*>(key.jwk.get()), &err)) {
      verified = true;
      break;
    }
  }
  if (!tried) {
    return Refused(kid.empty() ? "no key of the provider's signs with " + alg
                               : "the provider has no key '" + kid.substr(0, 64) + "' for " + alg);
  }
  if (!verified) return Refused("the token's signature does not verify with the provider's key");
  uint8_t* payload = nullptr;
  size_t payload_len = 0;
  if (!cjose_jws_get_plaintext(jws.get(), &payload, &payload_len, &err)) return Refused("the token has no claims");
  nlohmann::json claims = nlohmann::json::parse(reinterpret_cast<const char*>(payload),
                                                reinterpret_cast<const char*>(payload) + payload_len, nullptr, false);
  if (claims.is_discarded()) return Refused("the token's claims are not JSON");
  if (Status s = CheckClaims(claims, want); !s.ok()) return s;
  return claims;
}

}  // namespace gantry
