// Signs test tokens as a provider (and as a forger) would: RSA and EC keys made with cjose,
// their public JWKS, and compact JWS tokens with any header and claims.
#pragma once

#include <cjose/cjose.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace gantry::testing {

inline int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline std::string Base64UrlOf(const std::string& bytes) {
  char* out = nullptr;
  size_t len = 0;
  cjose_err err;
  cjose_base64url_encode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &out, &len, &err);
  std::string s(out, len);
  cjose_get_dealloc()(out);
  return s;
}

class TestKey {
 public:
  static TestKey Rsa(std::string kid) {
    static const uint8_t kE[] = {0x01, 0x00, 0x01};
    cjose_err err;
    return TestKey(cjose_jwk_create_RSA_random(2048, kE, sizeof kE, &err), std::move(kid));
  }
  static TestKey Ec(std::string kid) {
    cjose_err err;
    return TestKey(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &err), std::move(kid));
  }
  // A shared-secret key made of `secret`'s bytes (what a forger would use for HS256).
  static TestKey Hmac(const std::string& secret, std::string kid) {
    cjose_err err;
    return TestKey(cjose_jwk_create_oct_spec(reinterpret_cast<const uint8_t*>(secret.data()), secret.size(), &err),
                   std::move(kid));
  }

  const std::string& kid() const { return kid_; }
  // The key as its JWKS entry (public parts only; `with_private` for a careless provider's).
  nlohmann::json Jwk(bool with_private = false) const {
    cjose_err err;
    char* text = cjose_jwk_to_json(jwk_.get(), with_private, &err);
    nlohmann::json j = nlohmann::json::parse(text);
    cjose_get_dealloc()(text);
    j["kid"] = kid_;
    return j;
  }

  // A compact JWS of `claims` with alg `alg` and this key's kid (or `kid` when given).
  std::string Sign(const nlohmann::json& claims, const std::string& alg = "RS256",
                   const std::string& kid = "\x01") const {
    cjose_err err;
    cjose_header_t* header = cjose_header_new(&err);
    cjose_header_set(header, CJOSE_HDR_ALG, alg.c_str(), &err);
    std::string k = kid == "\x01" ? kid_ : kid;
    if (!k.empty()) cjose_header_set(header, CJOSE_HDR_KID, k.c_str(), &err);
    std::string payload = claims.dump();
    cjose_jws_t* jws =
        cjose_jws_sign(jwk_.get(), header, reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &err);
    const char* compact = nullptr;
    std::string out = jws && cjose_jws_export(jws, &compact, &err) ? compact : "";
    cjose_jws_release(jws);
    cjose_header_release(header);
    return out;
  }

 private:
  TestKey(cjose_jwk_t* jwk, std::string kid) : jwk_(jwk, cjose_jwk_release), kid_(std::move(kid)) {}
  std::shared_ptr<cjose_jwk_t> jwk_;
  std::string kid_;
};

inline std::string JwksOf(std::initializer_list<const TestKey*> keys) {
  nlohmann::json set = {{"keys", nlohmann::json::array()}};
  for (const TestKey* k : keys) set["keys"].push_back(k->Jwk());
  return set.dump();
}

// An unsigned token ("alg": "none"), as a forger would send it.
inline std::string UnsignedToken(const nlohmann::json& claims, const std::string& kid) {
  nlohmann::json header = {{"alg", "none"}, {"kid", kid}};
  return Base64UrlOf(header.dump()) + "." + Base64UrlOf(claims.dump()) + ".";
}

// The claims of a fresh ID token from `issuer` for `audience`.
inline nlohmann::json IdClaims(const std::string& issuer, const std::string& audience, const std::string& user,
                               nlohmann::json groups = nlohmann::json::array()) {
  int64_t now = NowSeconds();
  return {{"iss", issuer},   {"aud", audience},  {"sub", user + "-sub"},
          {"iat", now},      {"exp", now + 300}, {"preferred_username", user},
          {"groups", groups}};
}

}  // namespace gantry::testing
