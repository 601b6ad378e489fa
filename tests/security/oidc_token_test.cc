// Forged and misused identity tokens: what a hostile tenant (or anyone who can reach the
// provider's public keys) would hand Gantry as an ID token. Each must be refused, naming why.
#include <gtest/gtest.h>

#include "identity/jwt_minter.h"
#include "identity/jwt_verify.h"

namespace gantry {
namespace {

using testing::IdClaims;
using testing::NowSeconds;
using testing::TestKey;

constexpr const char* kIssuer = "https://idp.example.org/realms/acme";
constexpr const char* kClient = "gantry";

class OidcTokenSecurity : public ::testing::Test {
 protected:
  OidcTokenSecurity() : provider_(TestKey::Rsa("k1")), forger_(TestKey::Rsa("k1")) {
    keys_ = *JwksKeys::FromJson(testing::JwksOf({&provider_}));
  }

  Expected<nlohmann::json> Verify(const std::string& token, const std::string& nonce = "") {
    return VerifyJwt(token, keys_, JwtExpectations{kIssuer, kClient, nonce, NowSeconds(), 60});
  }
  void ExpectRefused(const std::string& token, const std::string& why) {
    auto claims = Verify(token);
    ASSERT_FALSE(claims.ok()) << "accepted: " << token;
    EXPECT_EQ(claims.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(claims.status().message().find(why), std::string::npos) << claims.status().message();
  }

  TestKey provider_;
  TestKey forger_;  // same kid, another key
  JwksKeys keys_;
};

TEST_F(OidcTokenSecurity, AProviderSignedTokenIsAccepted) {
  auto claims = Verify(provider_.Sign(IdClaims(kIssuer, kClient, "alice", {"ml-vision"})));
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ((*claims)["preferred_username"], "alice");
  EXPECT_EQ((*claims)["groups"][0], "ml-vision");
}

TEST_F(OidcTokenSecurity, AnotherKeysSignatureIsRefused) {
  ExpectRefused(forger_.Sign(IdClaims(kIssuer, kClient, "alice")), "signature does not verify");
}

TEST_F(OidcTokenSecurity, AnotherIssuerIsRefused) {
  ExpectRefused(provider_.Sign(IdClaims("https://evil.example.org", kClient, "alice")), "another issuer");
}

TEST_F(OidcTokenSecurity, AnotherAudienceIsRefused) {
  ExpectRefused(provider_.Sign(IdClaims(kIssuer, "another-app", "alice")), "another audience");
  // Several audiences: the authorized party must be Gantry.
  nlohmann::json claims = IdClaims(kIssuer, kClient, "alice");
  claims["aud"] = {kClient, "another-app"};
  ExpectRefused(provider_.Sign(claims), "authorized party");
  claims["azp"] = "another-app";
  ExpectRefused(provider_.Sign(claims), "authorized party");
  claims["azp"] = kClient;
  EXPECT_TRUE(Verify(provider_.Sign(claims)).ok());
}

TEST_F(OidcTokenSecurity, AnExpiredTokenIsRefusedPastTheSkew) {
  nlohmann::json claims = IdClaims(kIssuer, kClient, "alice");
  claims["exp"] = NowSeconds() - 61;
  ExpectRefused(provider_.Sign(claims), "expired");
  claims["exp"] = NowSeconds() - 30;  // within the minute of clock skew
  EXPECT_TRUE(Verify(provider_.Sign(claims)).ok());
  claims.erase("exp");
  ExpectRefused(provider_.Sign(claims), "no expiry");
}

TEST_F(OidcTokenSecurity, ATokenFromTheFutureIsRefused) {
  nlohmann::json claims = IdClaims(kIssuer, kClient, "alice");
  claims["nbf"] = NowSeconds() + 600;
  ExpectRefused(provider_.Sign(claims), "not valid yet");
  claims.erase("nbf");
  claims["iat"] = NowSeconds() + 600;
  ExpectRefused(provider_.Sign(claims), "issued in the future");
}

TEST_F(OidcTokenSecurity, AnUnsignedTokenIsRefused) {
  ExpectRefused(testing::UnsignedToken(IdClaims(kIssuer, kClient, "alice"), "k1"), "not one a provider signs with");
  // The same with a signature part stuck on.
  ExpectRefused(testing::UnsignedToken(IdClaims(kIssuer, kClient, "alice"), "k1") + "c2lnbmF0dXJl",
                "not one a provider signs with");
}

TEST_F(OidcTokenSecurity, AKeyIdNotInTheKeySetIsRefused) {
  TestKey stranger = TestKey::Rsa("k-unknown");
  ExpectRefused(stranger.Sign(IdClaims(kIssuer, kClient, "alice")), "has no key 'k-unknown'");
}

TEST_F(OidcTokenSecurity, AnHmacTokenSignedWithThePublicKeyIsRefused) {
  // The classic confusion: HS256 with the provider's public key (its JWK text, or its
  // modulus) as the shared secret, under the provider's own kid.
  for (const std::string& secret : {provider_.Jwk().dump(), provider_.Jwk()["n"].get<std::string>()}) {
    TestKey hmac = TestKey::Hmac(secret, "k1");
    ExpectRefused(hmac.Sign(IdClaims(kIssuer, kClient, "alice"), "HS256"), "not one a provider signs with");
  }
}

TEST_F(OidcTokenSecurity, SymmetricAndPrivateKeysInTheKeySetAreNotUsed) {
  // A key set that (wrongly) carries a shared secret: tokens signed with it are not taken.
  TestKey secret = TestKey::Hmac("a shared secret that is long enough", "oct1");
  nlohmann::json set = {{"keys", {provider_.Jwk(), secret.Jwk(true)}}};
  auto keys = JwksKeys::FromJson(set.dump());
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 1u);
  EXPECT_FALSE(VerifyJwt(secret.Sign(IdClaims(kIssuer, kClient, "alice"), "HS256"), *keys,
                         JwtExpectations{kIssuer, kClient, "", NowSeconds(), 60})
                   .ok());
  // An RSA key published with its private parts is a provider's mistake, not a signing key.
  nlohmann::json leaked = {{"keys", {provider_.Jwk(true)}}};
  EXPECT_EQ(JwksKeys::FromJson(leaked.dump())->size(), 0u);
}

TEST_F(OidcTokenSecurity, AKeyIsUsedOnlyForItsAlgorithm) {
  nlohmann::json jwk = provider_.Jwk();
  jwk["alg"] = "RS512";
  auto keys = JwksKeys::FromJson(nlohmann::json{{"keys", {jwk}}}.dump());
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE(VerifyJwt(provider_.Sign(IdClaims(kIssuer, kClient, "alice"), "RS256"), *keys,
                         JwtExpectations{kIssuer, kClient, "", NowSeconds(), 60})
                   .ok());
  EXPECT_TRUE(VerifyJwt(provider_.Sign(IdClaims(kIssuer, kClient, "alice"), "RS512"), *keys,
                        JwtExpectations{kIssuer, kClient, "", NowSeconds(), 60})
                  .ok());
}

TEST_F(OidcTokenSecurity, ECKeysVerifyAndTheNonceBindsTheSignIn) {
  TestKey ec = TestKey::Ec("e1");
  keys_ = *JwksKeys::FromJson(testing::JwksOf({&provider_, &ec}));
  nlohmann::json claims = IdClaims(kIssuer, kClient, "alice");
  claims["nonce"] = "n-123";
  EXPECT_TRUE(Verify(ec.Sign(claims, "ES256"), "n-123").ok());
  auto other = Verify(ec.Sign(claims, "ES256"), "n-456");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("nonce"), std::string::npos);
  // An RSA algorithm named over an EC key's kid finds no key.
  ExpectRefused(provider_.Sign(IdClaims(kIssuer, kClient, "alice"), "RS256", "e1"), "has no key 'e1'");
}

TEST_F(OidcTokenSecurity, GarbageAndOversizedTokensAreRefused) {
  ExpectRefused("", "not a signed JWT");
  ExpectRefused("a.b", "not a signed JWT");
  ExpectRefused("not.a.jwt", "not a signed JWT");
  ExpectRefused(std::string(20000, 'a') + ".b.c", "too long");
  nlohmann::json claims = IdClaims(kIssuer, kClient, "alice");
  claims["sub"] = "";
  ExpectRefused(provider_.Sign(claims), "no subject");
}

}  // namespace
}  // namespace gantry
