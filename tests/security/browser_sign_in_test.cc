// The dashboard's sign-in (/auth/login, /auth/callback) against a real server and a provider
// played by the test: what the callback needs travels sealed in the browser's own cookie,
// so the server keeps no table of sign-ins under way that callers from many addresses could
// fill. A cookie from another browser's sign-in, an altered one, none at all, or one sealed
// by another server process finishes nothing; the genuine one signs in with its PKCE
// verifier and nonce.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "command_util.h"
#include "identity/fake_provider.h"
#include "identity/oidc_provider.h"
#include "identity/sealed_box.h"
#include "server/server_process.h"

namespace gantry {
namespace {

using testing::IdClaims;
using testing::TestKey;

// The value of `name` in a URL's query (no decoding: the server's values are URL-safe).
std::string QueryValue(const std::string& url, const std::string& name) {
  size_t at = url.find("?" + name + "=");
  if (at == std::string::npos) at = url.find("&" + name + "=");
  if (at == std::string::npos) return "";
  size_t from = at + name.size() + 2;
  return url.substr(from, url.find('&', from) - from);
}

class BrowserSignInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = std::make_unique<TestKey>(TestKey::Rsa("k1"));
    idp_.Publish({key_.get()});
    dir_ = std::filesystem::temp_directory_path() / fmt::format("gantry-browser-sign-in-{}", ::getpid());
    server_ = std::make_unique<testing::ServerProcess>(dir_.string());
    std::ofstream(dir_ / "config/identity.yaml") << "oidc:\n  issuer: " << idp_.issuer() << "\n  client_id: gantry\n"
                                                 << "groups:\n  ml-vision: {team: vision}\n"
                                                 << "sessions: {refresh_reuse_grace: 1s}\n";
    server_->Start();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  struct Started {
    std::string state, nonce, challenge, cookie;
  };
  // A browser pressing "Sign in": where it is sent and the cookie it is given.
  Started Start() {
    httplib::Client c(server_->address());
    auto r = c.Get("/auth/login?next=%23/jobs");
    EXPECT_EQ(r->status, 302) << r->body;
    std::string url = r->get_header_value("Location");
    std::string set = r->get_header_value("Set-Cookie");
    EXPECT_EQ(set.rfind("gantry_signin=", 0), 0u) << set;
    EXPECT_NE(set.find("HttpOnly"), std::string::npos) << set;
    std::string cookie = set.substr(14, set.find(';') - 14);
    return {QueryValue(url, "state"), QueryValue(url, "nonce"), QueryValue(url, "code_challenge"), cookie};
  }
  // The provider sends the browser back with `state` and a code; the browser shows `cookie`.
  httplib::Result Callback(const std::string& state, const std::string& cookie) {
    httplib::Client c(server_->address());
    httplib::Headers h;
    if (!cookie.empty()) h.emplace("Cookie", "gantry_signin=" + cookie);
    return c.Get("/auth/callback?code=the-code&state=" + state, h);
  }
  void ProviderSignsIn(const std::string& user, const std::string& nonce) {
    nlohmann::json claims = IdClaims(idp_.issuer(), "gantry", user, {"ml-vision"});
    claims["nonce"] = nonce;
    idp_.Answer(key_->Sign(claims));
  }

  testing::FakeProvider idp_;
  std::unique_ptr<TestKey> key_;
  std::filesystem::path dir_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(BrowserSignInTest, TheBrowserThatStartedASignInFinishesItWithItsVerifierAndNonce) {
  Started s = Start();
  ASSERT_FALSE(s.state.empty());
  ASSERT_FALSE(s.cookie.empty());
  EXPECT_EQ(s.cookie.find(s.state), std::string::npos) << "the cookie is sealed, not the state in clear";
  ProviderSignsIn("ada", s.nonce);
  auto r = Callback(s.state, s.cookie);
  ASSERT_EQ(r->status, 302) << r->body;
  EXPECT_EQ(r->get_header_value("Location"), "/#/jobs");
  bool refresh_cookie = false;
  for (const auto& [name, value] : r->headers) {
    refresh_cookie = refresh_cookie || (name == "Set-Cookie" && value.rfind("gantry_refresh=gsr_", 0) == 0);
  }
  EXPECT_TRUE(refresh_cookie);
  // The token request carried the verifier whose challenge went to the provider.
  std::string form = idp_.last_form();
  std::string verifier = QueryValue("?" + form, "code_verifier");
  EXPECT_EQ(PkceChallenge(verifier), s.challenge) << form;
}

TEST_F(BrowserSignInTest, AnotherBrowsersAnAlteredOrNoCookieFinishesNothing) {
  Started victim = Start(), attacker = Start();
  ProviderSignsIn("ada", victim.nonce);
  // The attacker's own cookie with the victim's state (a code planted in a browser).
  auto planted = Callback(victim.state, attacker.cookie);
  EXPECT_EQ(planted->status, 401) << planted->body;
  EXPECT_NE(planted->body.find("started in another browser"), std::string::npos) << planted->body;
  // One character changed anywhere in the cookie.
  for (size_t at : {size_t{0}, victim.cookie.size() / 2, victim.cookie.size() - 1}) {
    std::string altered = victim.cookie;
    altered[at] = altered[at] == 'A' ? 'B' : 'A';
    EXPECT_EQ(Callback(victim.state, altered)->status, 401) << at;
  }
  EXPECT_EQ(Callback(victim.state, victim.cookie.substr(0, 20))->status, 401);
  EXPECT_EQ(Callback(victim.state, std::string(3000, 'A'))->status, 401);
  EXPECT_EQ(Callback(victim.state, std::string(9000, 'A'))->status, 400) << "past the open paths' header limit";
  // No cookie: nothing was started in this browser.
  auto none = Callback(victim.state, "");
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->body.find("no sign-in was started in this browser"), std::string::npos) << none->body;
  // Sealed by someone else's key (as a forger would, knowing the format).
  SealedBox other;
  std::string forged = other.Seal(nlohmann::json{{"state", victim.state},
                                                 {"nonce", victim.nonce},
                                                 {"verifier", "v"},
                                                 {"redirect_uri", "http://x/auth/callback"},
                                                 {"next", ""},
                                                 {"expires_ms", int64_t{1} << 50}}
                                      .dump(),
                                  "gantry browser sign-in v1");
  EXPECT_EQ(Callback(victim.state, forged)->status, 401);
  // Nothing above signed anyone in; the victim's own browser still can, once.
  EXPECT_EQ(Callback(victim.state, victim.cookie)->status, 302);
  int asked = idp_.token_calls();
  auto again = Callback(victim.state, victim.cookie);
  EXPECT_EQ(again->status, 401);
  EXPECT_NE(again->body.find("this sign-in was finished already"), std::string::npos) << again->body;
  EXPECT_EQ(idp_.token_calls(), asked) << "a spent sign-in sends nothing to the provider";
}

TEST_F(BrowserSignInTest, WordsInTheCallbackUrlAreShownOnlyForASignInUnderWay) {
  httplib::Client c(server_->address());
  auto forged = c.Get("/auth/callback?error=Your+account+is+locked&error_description=call+555&state=x");
  EXPECT_EQ(forged->status, 400);
  EXPECT_EQ(forged->body.find("Your account is locked"), std::string::npos) << forged->body;
  EXPECT_NE(forged->body.find("No sign-in is under way in this browser"), std::string::npos) << forged->body;
  Started s = Start();
  auto real = c.Get("/auth/callback?error=access_denied&state=" + s.state, {{"Cookie", "gantry_signin=" + s.cookie}});
  EXPECT_EQ(real->status, 401);
  EXPECT_NE(real->body.find("The identity provider answered: access_denied"), std::string::npos) << real->body;
}

TEST_F(BrowserSignInTest, AnotherSitesPageCannotUseTheSessionCookie) {
  Started s = Start();
  ProviderSignsIn("ada", s.nonce);
  auto r = Callback(s.state, s.cookie);
  std::string refresh;
  for (const auto& [name, value] : r->headers) {
    if (name == "Set-Cookie" && value.rfind("gantry_refresh=", 0) == 0)
      refresh = value.substr(15, value.find(';') - 15);
  }
  ASSERT_FALSE(refresh.empty());
  httplib::Client c(server_->address());
  httplib::Headers evil = {{"Cookie", "gantry_refresh=" + refresh}, {"Origin", "http://evil.example"}};
  auto out = c.Post("/v1/auth/logout", evil, "{}", "text/plain");
  EXPECT_EQ(out->status, 403) << out->body;
  auto renewed = c.Post("/v1/auth/refresh", evil, "{}", "application/json");
  EXPECT_EQ(renewed->status, 403) << renewed->body;
  // From the server's own page, the cookie works.
  httplib::Headers own = {{"Cookie", "gantry_refresh=" + refresh},
                          {"Origin", "http://" + server_->address().substr(server_->address().find("://") + 3)}};
  auto ok = c.Post("/v1/auth/refresh", own, "{}", "application/json");
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// The refresh token in the cookie after a sign-in through the browser.
std::string RefreshCookieOf(const httplib::Result& r) {
  for (const auto& [name, value] : r->headers) {
    if (name == "Set-Cookie" && value.rfind("gantry_refresh=", 0) == 0) return value.substr(15, value.find(';') - 15);
  }
  return "";
}

TEST_F(BrowserSignInTest, ASpentRefreshTokenUsedAgainLaterEndsTheSession) {
  Started s = Start();
  ProviderSignsIn("ada", s.nonce);
  std::string first = RefreshCookieOf(Callback(s.state, s.cookie));
  ASSERT_FALSE(first.empty());
  httplib::Client c(server_->address());
  auto refresh = [&](const std::string& token) {
    auto r = c.Post("/v1/auth/refresh", nlohmann::json{{"refresh_token", token}}.dump(), "application/json");
    return std::pair{r->status, nlohmann::json::parse(r->body, nullptr, false)};
  };
  auto [status, owner] = refresh(first);
  ASSERT_EQ(status, 200) << owner.dump();
  // At once: a request that crossed the owner's refresh (another tab); the session goes on.
  auto [crossed, why] = refresh(first);
  EXPECT_EQ(crossed, 409);
  EXPECT_NE(why.dump().find("just refreshed by another tab"), std::string::npos) << why.dump();
  auto [again, renewed] = refresh(owner["refresh_token"]);
  ASSERT_EQ(again, 200) << renewed.dump();
  // Two refreshes of one session at the same moment (two tabs): one wins, the other is
  // told to use its tokens (409); the provider's refresh token is spent once, so a provider
  // that ends sessions on reuse keeps this one.
  int asked = idp_.token_calls();
  std::string current = renewed["refresh_token"];
  nlohmann::json latest;
  std::vector<int> statuses(2);
  std::vector<std::thread> tabs;
  for (int t = 0; t < 2; ++t) {
    tabs.emplace_back([&, t] {
      httplib::Client tab(server_->address());
      auto answer = tab.Post("/v1/auth/refresh", nlohmann::json{{"refresh_token", current}}.dump(), "application/json");
      statuses[t] = answer->status;
      if (answer->status == 200) latest = nlohmann::json::parse(answer->body);
    });
  }
  for (auto& t : tabs) t.join();
  std::sort(statuses.begin(), statuses.end());
  EXPECT_EQ(statuses, (std::vector<int>{200, 409}));
  EXPECT_EQ(idp_.token_calls(), asked + 1);
  // Past the grace (1 s here): a copy someone kept. The session ends for thief and owner.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto [stolen, ended] = refresh(first);
  EXPECT_EQ(stolen, 401);
  EXPECT_NE(ended.dump().find("used already: the session is ended"), std::string::npos) << ended.dump();
  EXPECT_EQ(refresh(latest["refresh_token"]).first, 401);
  auto who = c.Get("/v1/whoami", {{"Authorization", "Bearer " + latest["access_token"].get<std::string>()}});
  EXPECT_EQ(who->status, 401);
  auto audit = c.Get("/v1/audit?limit=20", {{"Authorization", std::string("Bearer ") + testing::kRootToken}});
  EXPECT_NE(audit->body.find("was used again; the session is revoked"), std::string::npos) << audit->body;
}

TEST_F(BrowserSignInTest, CommandsRunSideBySideRefreshTheCliSessionOnce) {
  Started s = Start();
  ProviderSignsIn("ada", s.nonce);
  std::string refresh = RefreshCookieOf(Callback(s.state, s.cookie));
  ASSERT_FALSE(refresh.empty());
  // The CLI's saved session, its access token due: every command below refreshes first.
  std::filesystem::path home = dir_ / "home";
  std::filesystem::create_directories(home / ".config/gantry");
  std::ofstream(home / ".config/gantry/sessions.json") << nlohmann::json{
      {server_->address(),
       {{"access_token", "gsa_due"},
        {"refresh_token", refresh},
        {"access_expires_s", 0},
        {"user", "ada"},
        {"team", "vision"},
        {"source", "oidc"}}}}.dump();
  const std::string run =
      fmt::format("HOME={} GANTRY_SERVER={} {} whoami", home.string(), server_->address(), GANTRY_BINARY);
  std::string out;
  ASSERT_EQ(testing::RunCommand(fmt::format("for i in 1 2 3 4 5 6; do ({} > {}/out.$i 2>&1 || echo failed >> "
                                            "{}/out.$i) & done; wait; cat {}/out.*",
                                            run, home.string(), home.string(), home.string()),
                                &out),
            0);
  EXPECT_EQ(out, [] {
    std::string six;
    for (int i = 0; i < 6; ++i) six += "ada (team vision, role user)\n";
    return six;
  }());
  // Past the grace, the session still works: nobody used a spent refresh token.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  out.clear();
  EXPECT_EQ(testing::RunCommand(run + " 2>&1", &out), 0) << out;
}

TEST_F(BrowserSignInTest, ASignInStartedBeforeARestartIsStartedAgain) {
  Started s = Start();
  ProviderSignsIn("ada", s.nonce);
  server_->Kill(SIGTERM);
  server_->Start();
  auto r = Callback(s.state, s.cookie);
  EXPECT_EQ(r->status, 401) << r->body;
}

}  // namespace
}  // namespace gantry
