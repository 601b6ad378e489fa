// Checking a JSON Web Token an identity provider signed: the signature against the keys it
// publishes (its JWKS), the algorithm against those a provider signs with (never "none",
// never an HMAC, whose key would be public), and the claims a relying party must check
// (issuer, audience, authorized party, expiry, not-before, issue time, nonce). The JOSE
// parsing and signature checks are cjose's.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

// The provider's signing keys, from its JWKS document. Only public RSA and EC keys meant
// for signatures are kept; the others (encryption keys, symmetric keys) are skipped.
class JwksKeys {
 public:
  static Expected<JwksKeys> FromJson(const std::string& text);
  bool HasKeyId(const std::string& kid) const;
  size_t size() const { return keys_.size(); }

  struct Key {
    std::shared_ptr<void> jwk;  // cjose_jwk_t
    std::string kid;
    std::string kty;  // RSA or EC
    std::string alg;  // the one algorithm the key is for (empty: any of its type)
  };
  const std::vector<Key>& keys() const { return keys_; }

 private:
  std::vector<Key> keys_;
};

struct JwtExpectations {
  std::string issuer;    // `iss` must equal it
  std::string audience;  // `aud` must contain it; with several audiences `azp` must be it
  std::string nonce;     // non-empty: `nonce` must equal it (the sign-in that asked for the token)
  int64_t now_s = 0;     // seconds since the epoch
  int64_t skew_s = 60;   // clock difference tolerated on exp, nbf and iat
};

// The key id in a token's header ("" when it names none or is not a signed JWT): a kid the
// keys do not hold means the provider rotated them, and its JWKS is worth fetching again.
std::string JwtKeyId(const std::string& token);

// The token's claims when it is signed by one of `keys` and meets `want`; otherwise
// kUnauthenticated with the reason (field "token"; messages name the claim that failed).
Expected<nlohmann::json> VerifyJwt(const std::string& token, const JwksKeys& keys, const JwtExpectations& want);

}  // namespace gantry
