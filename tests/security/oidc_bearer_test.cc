// The provider's own JWTs as bearer tokens at the API (identity.yaml oidc.bearer_audience),
// against a real server: a token the provider signed for Gantry's API works as its person;
// forged, expired, other-audience, unsigned and HMAC-confused tokens answer 401 saying why;
// session tokens that are made up, revoked or for a team the person is not in, too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "identity/fake_provider.h"
#include "server/server_process.h"

namespace gantry {
namespace {

using testing::IdClaims;
using testing::TestKey;

class OidcBearerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = std::make_unique<TestKey>(TestKey::Rsa("k1"));
    idp_.Publish({key_.get()});
    dir_ = std::filesystem::temp_directory_path() / fmt::format("gantry-oidc-bearer-{}", ::getpid());
    server_ = std::make_unique<testing::ServerProcess>(dir_.string());
    std::ofstream(dir_ / "config/identity.yaml")
        << "oidc:\n  issuer: " << idp_.issuer() << "\n  client_id: gantry\n  bearer_audience: gantry-api\n"
        << "groups:\n  ml-vision: {team: vision}\n  ml-nlp: {team: nlp}\n";
    server_->Start();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  nlohmann::json Claims(const std::string& user, nlohmann::json groups) {
    return IdClaims(idp_.issuer(), "gantry-api", user, std::move(groups));
  }
  std::pair<int, nlohmann::json> WhoAmI(const std::string& token, const std::string& team = "") {
    httplib::Client c(server_->address());
    httplib::Headers h = {{"Authorization", "Bearer " + token}};
    if (!team.empty()) h.emplace("X-Gantry-Team", team);
    auto r = c.Get("/v1/whoami", h);
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  void ExpectRefused(const std::string& token, const std::string& why) {
    auto [status, body] = WhoAmI(token);
    EXPECT_EQ(status, 401) << body.dump();
    EXPECT_NE(body["error"]["message"].get<std::string>().find(why), std::string::npos) << body.dump();
  }

  testing::FakeProvider idp_;
  std::unique_ptr<TestKey> key_;
  std::filesystem::path dir_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(OidcBearerTest, AProviderTokenForTheApiActsAsItsPersonInTheirTeams) {
  std::string token = key_->Sign(Claims("carla", {"ml-vision", "ml-nlp"}));
  auto [status, who] = WhoAmI(token);
  ASSERT_EQ(status, 200) << who.dump();
  EXPECT_EQ(who["user"], "carla");
  EXPECT_EQ(who["team"], "nlp");  // the first of her teams
  EXPECT_EQ(WhoAmI(token, "vision").second["team"], "vision");
  // She submits for either of her teams (--team), and for no other.
  httplib::Client c(server_->address());
  httplib::Headers h = {{"Authorization", "Bearer " + token}};
  auto vision = c.Post("/v1/jobs", h, R"({"gpus": 1, "team": "vision", "command": "sleep 30"})", "application/json");
  ASSERT_EQ(vision->status, 201) << vision->body;
  EXPECT_EQ(nlohmann::json::parse(vision->body)["team"], "vision");
  EXPECT_EQ(nlohmann::json::parse(vision->body)["user"], "carla");
  auto ops = c.Post("/v1/jobs", h, R"({"gpus": 1, "team": "ops", "command": "sleep 30"})", "application/json");
  EXPECT_EQ(ops->status, 403) << ops->body;
  auto [other, body] = WhoAmI(token, "ops");
  EXPECT_EQ(other, 401);
  EXPECT_NE(body.dump().find("carla is not a member of team ops (member of: nlp,vision)"), std::string::npos)
      << body.dump();
}

TEST_F(OidcBearerTest, ForgedAndMisusedTokensAnswer401WithTheReason) {
  TestKey forger = TestKey::Rsa("k1");
  ExpectRefused(forger.Sign(Claims("carla", {"ml-vision"})), "signature does not verify");
  nlohmann::json expired = Claims("carla", {"ml-vision"});
  expired["exp"] = testing::NowSeconds() - 120;
  ExpectRefused(key_->Sign(expired), "expired");
  // An ID token (audience: the client) is not an API token.
  ExpectRefused(key_->Sign(IdClaims(idp_.issuer(), "gantry", "carla", {"ml-vision"})), "another audience");
  ExpectRefused(testing::UnsignedToken(Claims("carla", {"ml-vision"}), "k1"), "not one a provider signs with");
  TestKey hmac = TestKey::Hmac(key_->Jwk().dump(), "k1");
  ExpectRefused(hmac.Sign(Claims("carla", {"ml-vision"}), "HS256"), "not one a provider signs with");
  ExpectRefused(key_->Sign(Claims("root", {"ml-vision"})), "not a user name Gantry accepts");
  ExpectRefused(key_->Sign(Claims("dave", {"contractors"})), "none of dave's groups (contractors)");
  // Made-up session tokens, and none at all.
  ExpectRefused("gsa_not-a-session", "sign in again");
  auto [status, body] = WhoAmI("");
  EXPECT_EQ(status, 401);
  // A refused token on a change is audited.
  httplib::Client c(server_->address());
  auto r = c.Post("/v1/jobs", {{"Authorization", "Bearer " + forger.Sign(Claims("carla", {"ml-vision"}))}},
                  R"({"gpus": 1, "command": "true"})", "application/json");
  EXPECT_EQ(r->status, 401);
}

}  // namespace
}  // namespace gantry
