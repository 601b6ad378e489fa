// The provider client against a provider played by the test (discovery, keys, token
// endpoint on loopback): keys rotated while Gantry runs, and a token endpoint that answers
// with tokens Gantry must not take (another key, another audience, another sign-in's nonce,
// another person on refresh), and discovery documents that lie about the issuer.
#include "identity/oidc_provider.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

#include "identity/fake_provider.h"
#include "identity/jwt_minter.h"

namespace gantry {
namespace {

using testing::FakeProvider;
using testing::IdClaims;
using testing::TestKey;

OidcSettings Settings(const std::string& issuer) {
  OidcSettings s;
  s.issuer = issuer;
  s.client_id = "gantry";
  s.client_secret = "secret";
  return s;
}

class OidcProviderSecurity : public ::testing::Test {
 protected:
  OidcProviderSecurity() : k1_(TestKey::Rsa("k1")), k2_(TestKey::Rsa("k2")) {
    idp_.Publish({&k1_});
    client_ = std::make_unique<OidcProvider>(Settings(idp_.issuer()), [this] { return now_.load(); });
  }
  nlohmann::json Claims(const std::string& user = "alice") {
    nlohmann::json c = IdClaims(idp_.issuer(), "gantry", user, {"ml-vision"});
    c["iat"] = now_.load();
    c["exp"] = now_.load() + 300;
    c["nonce"] = "n-1";
    return c;
  }
  Expected<ProviderTokens> Exchange() { return client_->ExchangeCode("code", "verifier", "http://x/cb", "n-1"); }

  FakeProvider idp_;
  TestKey k1_, k2_;
  std::atomic<int64_t> now_{testing::NowSeconds()};
  std::unique_ptr<OidcProvider> client_;
};

TEST_F(OidcProviderSecurity, TheCodeExchangeSendsPkceAndChecksTheIdToken) {
  idp_.Answer(k1_.Sign(Claims()));
  auto tokens = Exchange();
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(tokens->claims["preferred_username"], "alice");
  EXPECT_EQ(tokens->refresh_token, "rt-next");
  EXPECT_NE(idp_.last_form().find("code_verifier=verifier"), std::string::npos) << idp_.last_form();
  EXPECT_NE(idp_.last_form().find("grant_type=authorization_code"), std::string::npos);
}

TEST_F(OidcProviderSecurity, RotatedKeysAreFetchedAgainButNotOnEveryUnknownKid) {
  idp_.Answer(k1_.Sign(Claims()));
  ASSERT_TRUE(Exchange().ok());
  const int fetches = idp_.jwks_fetches();
  // The provider rotates to k2. Within 30 s of the last fetch an unknown kid is refused
  // without asking again (a flood of made-up kids costs the provider nothing).
  idp_.Publish({&k2_});
  idp_.Answer(k2_.Sign(Claims()));
  auto early = Exchange();
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("no key 'k2'"), std::string::npos) << early.status().ToString();
  EXPECT_EQ(idp_.jwks_fetches(), fetches);
  now_ += 31;
  idp_.Answer(k2_.Sign(Claims()));
  auto later = Exchange();
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(idp_.jwks_fetches(), fetches + 1);
  // The retired key no longer signs for the provider.
  idp_.Answer(k1_.Sign(Claims()));
  EXPECT_FALSE(Exchange().ok());
}

TEST_F(OidcProviderSecurity, ATokenEndpointsForgeriesAreRefused) {
  TestKey stranger = TestKey::Rsa("k1");  // the provider's kid, another key
  idp_.Answer(stranger.Sign(Claims()));
  EXPECT_FALSE(Exchange().ok());
  nlohmann::json other_app = Claims();
  other_app["aud"] = "another-app";
  idp_.Answer(k1_.Sign(other_app));
  EXPECT_FALSE(Exchange().ok());
  nlohmann::json replayed = Claims();
  replayed["nonce"] = "n-of-another-sign-in";
  idp_.Answer(k1_.Sign(replayed));
  auto r = Exchange();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nonce"), std::string::npos);
  idp_.Answer(testing::UnsignedToken(Claims(), "k1"));
  EXPECT_FALSE(Exchange().ok());
  idp_.Answer("");
  auto none = Exchange();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().field(), "id_token");
}

TEST_F(OidcProviderSecurity, ARefreshMustBeTheSamePerson) {
  nlohmann::json bob = Claims("bob");
  bob.erase("nonce");
  idp_.Answer(k1_.Sign(bob));
  auto r = client_->Refresh("rt", "alice-sub");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "sub");
  nlohmann::json alice = Claims("alice");
  alice.erase("nonce");
  idp_.Answer(k1_.Sign(alice));
  EXPECT_TRUE(client_->Refresh("rt", "alice-sub").ok());
}

TEST_F(OidcProviderSecurity, ADiscoveryDocumentThatNamesAnotherIssuerIsRefused) {
  idp_.LieAboutIssuer("https://evil.example.org");
  Status s = client_->Discover();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("names issuer 'https://evil.example.org'"), std::string::npos) << s.ToString();
}

TEST_F(OidcProviderSecurity, EndpointsMustBeHttpsBeyondThisMachine) {
  idp_.TokenEndpoint("http://idp.example.org/token");
  Status s = client_->Discover();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("must be an https:// URL"), std::string::npos) << s.ToString();
  OidcProvider remote(Settings("http://idp.example.org"));
  Status plain = remote.Discover();
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.field(), "oidc.issuer");
}

}  // namespace
}  // namespace gantry
