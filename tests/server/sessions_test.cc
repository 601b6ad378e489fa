// Sign-in sessions: tokens that work until they end, refresh tokens spent once, revocation,
// and what the store keeps across a restart.
#include "server/sessions.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "server/store.h"
#include "state/auth.h"

namespace gantry {
namespace {

constexpr TimeMs kT0 = 1'800'000'000'000;

Session Alice() {
  Session s;
  s.user = "alice";
  s.source = "oidc";
  s.teams = {{"vision", "user"}, {"nlp", "team-admin"}};
  s.default_team = "nlp";
  s.provider_refresh = "provider-refresh-token";
  return s;
}

TEST(Sessions, AnAccessTokenWorksUntilItsEndAndNotAfter) {
  SessionTable table;
  SessionTokens t = table.Create(Alice(), kT0, 3600, 86400, true);
  EXPECT_EQ(t.access_token.rfind("gsa_", 0), 0u);
  EXPECT_EQ(t.refresh_token.rfind("gsr_", 0), 0u);
  auto s = table.Authenticate(t.access_token, kT0 + 1000, "127.0.0.9");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->user, "alice");
  EXPECT_EQ(table.Find(t.session.id)->last_address, "127.0.0.9");
  EXPECT_FALSE(table.Authenticate(t.access_token, kT0 + 3600 * 1000, "x").has_value());
  EXPECT_FALSE(table.Authenticate(t.refresh_token, kT0 + 1000, "x").has_value());  // not an access token
  EXPECT_FALSE(table.Authenticate("gsa_made-up", kT0, "x").has_value());
}

TEST(Sessions, ARefreshTokenIsSpentByItsFirstUse) {
  SessionTable table;
  SessionTokens t = table.Create(Alice(), kT0, 3600, 86400, true);
  auto found = table.FindByRefresh(t.refresh_token, kT0 + 3000 * 1000);
  ASSERT_TRUE(found.has_value());
  auto rotated = table.Rotate(*found, kT0 + 3000 * 1000, 3600);
  ASSERT_TRUE(rotated.has_value());
  EXPECT_NE(rotated->refresh_token, t.refresh_token);
  EXPECT_FALSE(table.FindByRefresh(t.refresh_token, kT0 + 3001 * 1000).has_value());  // the old one: spent
  EXPECT_FALSE(table.Rotate(*found, kT0 + 3001 * 1000, 3600).has_value());            // a racing second use
  // The spent one is known as spent, with when (a copy used again ends the session).
  auto spent = table.FindSpentRefresh(t.refresh_token, kT0 + 3001 * 1000);
  ASSERT_TRUE(spent.has_value());
  EXPECT_EQ(spent->first.id, t.session.id);
  EXPECT_EQ(spent->second, kT0 + 3000 * 1000);
  EXPECT_FALSE(table.FindSpentRefresh(rotated->refresh_token, kT0 + 3001 * 1000).has_value());
  // The access token from before stays good until its own end (another tab uses it).
  EXPECT_TRUE(table.Authenticate(t.access_token, kT0 + 3001 * 1000, "x").has_value());
  EXPECT_FALSE(table.Authenticate(t.access_token, kT0 + 3600 * 1000, "x").has_value());
  EXPECT_TRUE(table.Authenticate(rotated->access_token, kT0 + 6000 * 1000, "x").has_value());
  // Revoking the session ends every one of its tokens.
  SessionTokens u = table.Create(Alice(), kT0, 3600, 86400, true);
  auto u2 = table.Rotate(*table.FindByRefresh(u.refresh_token, kT0 + 10), kT0 + 10, 3600);
  ASSERT_TRUE(u2.has_value());
  table.Revoke(u.session.id, "alice", kT0 + 20);
  EXPECT_FALSE(table.Authenticate(u.access_token, kT0 + 30, "x").has_value());
  EXPECT_FALSE(table.Authenticate(u2->access_token, kT0 + 30, "x").has_value());
  // The session's lifetime bounds every refresh.
  EXPECT_FALSE(table.FindByRefresh(rotated->refresh_token, kT0 + 86400 * 1000).has_value());
}

TEST(Sessions, APersonHoldsAHundredAtMostTheOldestEnds) {
  SessionTable table;
  std::vector<SessionTokens> made;
  for (int i = 0; i < 101; ++i) made.push_back(table.Create(Alice(), kT0 + i, 3600, 86400, true));
  EXPECT_FALSE(table.Authenticate(made[0].access_token, kT0 + 200, "x").has_value());
  EXPECT_EQ(table.Find(made[0].session.id)->revoked_by, "session-limit");
  EXPECT_TRUE(table.Authenticate(made[1].access_token, kT0 + 200, "x").has_value());
  EXPECT_TRUE(table.Authenticate(made[100].access_token, kT0 + 200, "x").has_value());
}

TEST(Sessions, ARevokedSessionStopsAtOnce) {
  SessionTable table;
  SessionTokens t = table.Create(Alice(), kT0, 3600, 86400, true);
  EXPECT_TRUE(table.Revoke(t.session.id, "admin", kT0 + 10));
  EXPECT_FALSE(table.Authenticate(t.access_token, kT0 + 20, "x").has_value());
  EXPECT_FALSE(table.FindByRefresh(t.refresh_token, kT0 + 20).has_value());
  EXPECT_EQ(table.Find(t.session.id)->revoked_by, "admin");
  EXPECT_TRUE(table.Find(t.session.id)->provider_refresh.empty());
  EXPECT_EQ(SessionView(*table.Find(t.session.id), kT0 + 20)["state"], "revoked");
  EXPECT_FALSE(table.Revoke("s-none", "admin", kT0));
}

TEST(Sessions, TheStoreKeepsThemAcrossARestartWithoutTheTokens) {
  namespace fs = std::filesystem;
  fs::path db = fs::temp_directory_path() / fmt::format("gantry-sessions-{}.db", ::getpid());
  fs::remove(db);
  SessionTokens t;
  {
    SessionTable table;
    t = table.Create(Alice(), kT0, 3600, 86400, true);
    auto store = OpenSqliteStore(db.string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    StoreBatch batch;
    batch.sessions = table.TakeChanged(kT0);
    ASSERT_EQ(batch.sessions.size(), 1u);
    // Hashes only: the tokens themselves are never written.
    EXPECT_EQ(batch.sessions[0].second.find(t.access_token), std::string::npos);
    EXPECT_EQ(batch.sessions[0].second.find(t.refresh_token), std::string::npos);
    ASSERT_TRUE((*store)->Commit(batch).ok());
    EXPECT_TRUE(table.TakeChanged(kT0 + 1).empty());  // nothing new
  }
  auto store = OpenSqliteStore(db.string());
  ASSERT_TRUE(store.ok());
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok());
  SessionTable again;
  again.Load(loaded->sessions);
  auto s = again.Authenticate(t.access_token, kT0 + 1000, "x");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->teams.at("nlp"), "team-admin");
  EXPECT_EQ(s->provider_refresh, "provider-refresh-token");
  EXPECT_TRUE(again.FindByRefresh(t.refresh_token, kT0 + 1000).has_value());
  // A week after its end a session is deleted from the store.
  auto dropped = again.TakeChanged(kT0 + 86400 * 1000 + 8 * 86400 * 1000LL);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].second, "");
  StoreBatch batch;
  batch.sessions = dropped;
  ASSERT_TRUE((*store)->Commit(batch).ok());
  EXPECT_TRUE((*store)->Load()->sessions.empty());
  fs::remove(db);
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

TEST(StaticTokens, MayCarryAnExpiryAndAnswerNothingPastIt) {
  auto dir = UserDirectory::FromYaml(
      "users:\n"
      "  - {name: ci, team: vision, token_sha256: " +
      Sha256Hex("t-old") + ", expires: '2020-01-01T00:00:00Z'}\n" +
      "  - {name: ci2, team: vision, token_sha256: " + Sha256Hex("t-new") + ", expires: '2099-01-01T00:00:00Z'}\n" +
      "  - {name: login1, team: ops, role: login-node, token_sha256: " + Sha256Hex("t-login") + "}\n");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  const TimeMs now = 1'800'000'000'000;  // 2027
  EXPECT_EQ(dir->Authenticate("t-old", now), nullptr);
  ASSERT_NE(dir->Authenticate("t-new", now), nullptr);
  EXPECT_EQ(dir->Authenticate("t-new", now)->user, "ci2");
  EXPECT_EQ(dir->Authenticate("t-new", 4'070'908'800'000), nullptr);  // 2099-01-01T00:00:00Z: from then on
  EXPECT_EQ(dir->Authenticate("t-login", now)->role, Role::kLoginNode);
  EXPECT_EQ(dir->FindUser("login1"), nullptr);  // a host, not a person
  auto bad = UserDirectory::FromYaml("users:\n  - {name: ci, team: v, token_sha256: " + Sha256Hex("x") +
                                     ", expires: next week}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "users[0].expires");
}

}  // namespace
}  // namespace gantry
