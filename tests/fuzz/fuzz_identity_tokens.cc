// libFuzzer target: what an identity provider (or anyone posing as one) hands Gantry: ID
// tokens checked against a fixed key set, key sets themselves, and browser sign-in cookies
// (sealed boxes). Nothing crashes, and nothing unsigned by the fixed key or unsealed by the
// fixed box is ever accepted.
#include <cjose/cjose.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "identity/jwt_verify.h"
#include "identity/sealed_box.h"

namespace {

// A provider's public RSA key (made once per run) as its JWKS.
const gantry::JwksKeys& Keys() {
  static const gantry::JwksKeys keys = [] {
    static const uint8_t kE[] = {0x01, 0x00, 0x01};
    cjose_err err;
    cjose_jwk_t* jwk = cjose_jwk_create_RSA_random(2048, kE, sizeof kE, &err);
    char* json = cjose_jwk_to_json(jwk, false, &err);
    std::string set = std::string("{\"keys\":[") + json + "]}";
    cjose_get_dealloc()(json);
    cjose_jwk_release(jwk);
    return *gantry::JwksKeys::FromJson(set);
  }();
  return keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // The key is random: a fuzzer cannot forge its signature, so acceptance is a bug.
  auto claims = gantry::VerifyJwt(text, Keys(), {"https://idp.example.org", "gantry", "", 1800000000, 60});
  if (claims.ok()) std::abort();
  if (claims.status().message().empty()) std::abort();
  auto keys = gantry::JwksKeys::FromJson(text);
  if (keys.ok()) {
    gantry::JwtKeyId(text);
    gantry::VerifyJwt(text, *keys, {"https://idp.example.org", "gantry", "", 1800000000, 60});
  }
  static const gantry::SealedBox box;  // its key is random: nothing a fuzzer writes opens
  if (box.Open(text, "gantry browser sign-in v1")) std::abort();
  return 0;
}
