// identity.yaml: its fields, its refusals naming the field, and groups mapped to teams.
#include "identity/identity_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gantry {
namespace {

TEST(IdentityConfig, ReadsTheProviderGroupsSessionsAndLoginNodes) {
  auto c = IdentityConfig::FromYaml(R"(
oidc:
  issuer: https://idp.example.org/realms/acme
  client_id: gantry
  username_claim: email_local
  groups_claim: roles
groups:
  ml-vision: {team: vision}
  ml-vision-leads: {team: vision, role: team-admin}
  platform: {team: ops, role: admin}
sessions: {access: 30m, lifetime: 2d, refresh_reuse_grace: 5s}
login_nodes:
  groups: {vision: {team: vision}}
  min_uid: 2000
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->oidc.has_value());
  EXPECT_EQ(c->oidc->issuer, "https://idp.example.org/realms/acme");
  EXPECT_EQ(c->username_claim, "email_local");
  EXPECT_EQ(c->groups_claim, "roles");
  EXPECT_EQ(c->access_ttl_s, 1800);
  EXPECT_EQ(c->session_lifetime_s, 2 * 86400);
  EXPECT_EQ(c->refresh_reuse_grace_s, 5);
  EXPECT_EQ(c->groups.at("ml-vision-leads").role, "team-admin");
  EXPECT_EQ(c->login_nodes.min_uid, 2000);
  EXPECT_EQ(c->login_nodes.groups.at("vision").team, "vision");
}

TEST(IdentityConfig, TheWorkedExampleReads) {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) + "/examples/identity.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto c = IdentityConfig::FromYaml(text.str());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->groups.at("platform").role, "admin");
  EXPECT_EQ(c->refresh_reuse_grace_s, 30);
  EXPECT_EQ(c->login_nodes.groups.at("nlp").team, "nlp");
}

TEST(IdentityConfig, LoginNodesUseTheGroupsMapUnlessGivenTheirOwn) {
  auto c = IdentityConfig::FromYaml("groups: {vision: {team: vision}}\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->oidc.has_value());
  EXPECT_EQ(c->login_nodes.groups.at("vision").team, "vision");
  EXPECT_EQ(c->login_nodes.min_uid, 1000);
}

TEST(IdentityConfig, RefusalsNameTheField) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  for (const Case& k : std::initializer_list<Case>{
           {"oidc: {client_id: gantry}", "oidc.issuer"},
           {"oidc: {issuer: https://x, client_id: g, scopes: [profile]}", "oidc.scopes"},
           {"oidc: {issuer: https://x, client_id: g, colour: blue}", "oidc.colour"},
           {"groups: {g: {team: vision, role: boss}}", "groups.g.role"},
           {"groups: {g: {role: user}}", "groups.g.team"},
           {"sessions: {access: 10s}", "sessions.access"},
           {"sessions: {access: 2d, lifetime: 1d}", "sessions.access"},
           {"sessions: {refresh_reuse_grace: 1h}", "sessions.refresh_reuse_grace"},
           {"login_nodes: {min_uid: 0}", "login_nodes.min_uid"},
           {"colour: blue", ".colour"},
       }) {
    auto c = IdentityConfig::FromYaml(k.yaml);
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_EQ(c.status().field(), k.field) << k.yaml << ": " << c.status().ToString();
  }
}

TEST(IdentityConfig, TheClientSecretIsReadFromItsFileBesideTheConfig) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("gantry-identity-{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "identity.yaml") << "oidc: {issuer: https://x, client_id: g, client_secret_file: secret}\n";
  auto missing = IdentityConfig::LoadFile((dir / "identity.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().field().find("oidc.client_secret_file"), std::string::npos);
  std::ofstream(dir / "secret") << "s3cret\n";
  auto c = IdentityConfig::LoadFile((dir / "identity.yaml").string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->oidc->client_secret, "s3cret");
  fs::remove_all(dir);
}

TEST(IdentityConfig, GroupsGiveTeamsWithTheStrongestRole) {
  GroupMap map = {{"ml-vision", {"vision", "user"}},
                  {"ml-vision-leads", {"vision", "team-admin"}},
                  {"nlp", {"nlp", "user"}},
                  {"platform", {"ops", "admin"}}};
  Memberships m = MapGroups({"ml-vision", "ml-vision-leads", "nlp", "unmapped"}, map);
  EXPECT_FALSE(m.admin);
  EXPECT_EQ(m.teams.size(), 2u);
  EXPECT_EQ(m.teams.at("vision"), "team-admin");
  EXPECT_EQ(m.teams.at("nlp"), "user");
  EXPECT_TRUE(MapGroups({"platform"}, map).admin);
  EXPECT_TRUE(MapGroups({"unmapped"}, map).empty());
}

TEST(IdentityConfig, UserNamesFromClaimsAreUnixSafe) {
  EXPECT_EQ(*UserNameOfClaims({{"preferred_username", "alice.b"}}, "preferred_username"), "alice.b");
  for (const char* bad : {"root", "", "-rf", ".hidden", "a b", "al/ice", "al\nice"}) {
    EXPECT_FALSE(UserNameOfClaims({{"preferred_username", bad}}, "preferred_username").ok()) << bad;
  }
  EXPECT_FALSE(UserNameOfClaims({{"email", "a@b"}}, "preferred_username").ok());
  EXPECT_EQ(GroupsOfClaim({{"groups", "one"}}, "groups"), std::vector<std::string>{"one"});
  EXPECT_EQ(GroupsOfClaim({{"groups", {"a", 3, "b"}}}, "groups"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace gantry
