// /metrics carries every team's jobs and costs. On Kubernetes, with --metrics-need-token,
// besides Gantry admins only a token of audience gantry-metrics whose account the cluster's
// RBAC lets `get` gantry.io/metrics in gantry-system may read it (TokenReview, then
// SubjectAccessReview). The attacks: an account without the role, one that holds the
// cluster's own /metrics permission (as a cluster's Prometheus does), a node agent's token,
// the reader's own token for the API server or another audience, a JWT-shaped forgery, a
// user's token and no token at all.
#include <gtest/gtest.h>

#include <filesystem>

#include "kube/kube_fixture.h"

namespace gantry::testing {
namespace {

class KubeMetricsReaders : public OnKube {
 protected:
  void MakeServiceAccount(const std::string& ns, const std::string& name) {
    auto [status, body] = kube_.Api("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts",
                                    {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}});
    ASSERT_EQ(status, 201) << body.dump();
  }
};

struct Scrape {
  int status = 0;
  std::string body;
};

Scrape GetMetrics(const ServerProcess& server, const std::string& token) {
  auto c = server.Client(token.empty() ? nullptr : token.c_str());
  auto r = c.Get("/metrics");
  return r ? Scrape{r->status, r->body} : Scrape{};
}

TEST_F(KubeMetricsReaders, OnlyAnAccountThatRbacLetsGetMetricsAndAdminsMayScrape) {
  ASSERT_EQ(kube_
                .Api("POST", "/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "monitoring"}}}})
                .first,
            201);
  MakeServiceAccount("monitoring", "prometheus");
  MakeServiceAccount("monitoring", "nosy");
  MakeServiceAccount("monitoring", "cluster-scraper");
  // The cluster admin binds the manifests' reader role to Prometheus (docs/KUBERNETES.md);
  // another account holds only the cluster's own /metrics permission.
  std::string out;
  ASSERT_EQ(kube_.Kubectl("-n gantry-system create rolebinding gantry-metrics --clusterrole=gantry-metrics-reader "
                          "--serviceaccount=monitoring:prometheus",
                          &out),
            0)
      << out;
  ASSERT_EQ(kube_.Kubectl("create clusterrole cluster-metrics --verb=get --non-resource-url=/metrics", &out), 0) << out;
  ASSERT_EQ(kube_.Kubectl("create clusterrolebinding cluster-metrics --clusterrole=cluster-metrics "
                          "--serviceaccount=monitoring:cluster-scraper",
                          &out),
            0)
      << out;

  const std::string dir = TempPath("kube-metrics-readers");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  StartOnKube(server, kube_, dir, {"--metrics-need-token"});

  const std::string audience = "gantry-metrics";
  const std::string prometheus = kube_.TokenFor("monitoring", "prometheus", audience);
  ASSERT_FALSE(prometheus.empty());
  Scrape allowed = GetMetrics(server, prometheus);
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_NE(allowed.body.find("gantry_"), std::string::npos) << allowed.body;
  EXPECT_EQ(GetMetrics(server, prometheus).status, 200) << "asked again: the kept answer";

  // An account the role is not bound to: the cluster's answer, and what would allow it.
  Scrape nosy = GetMetrics(server, kube_.TokenFor("monitoring", "nosy", audience));
  EXPECT_EQ(nosy.status, 403) << nosy.body;
  EXPECT_NE(nosy.body.find("system:serviceaccount:monitoring:nosy may not read Gantry's metrics"), std::string::npos)
      << nosy.body;
  // The cluster's own /metrics permission is not Gantry's.
  Scrape cluster_scraper = GetMetrics(server, kube_.TokenFor("monitoring", "cluster-scraper", audience));
  EXPECT_EQ(cluster_scraper.status, 403) << cluster_scraper.body;
  // A node agent's projected token (audience gantry): not a token the API server takes for itself.
  nlohmann::json pod = AgentPod(kube_, "gantry-system", "gantry-agent-a", "node-a");
  Scrape agent = GetMetrics(server, kube_.TokenFor("gantry-system", "gantry-agent", "gantry", pod));
  EXPECT_EQ(agent.status, 401) << agent.body;
  // Prometheus's own account, its token made for the API server or for another audience.
  Scrape for_api = GetMetrics(server, kube_.TokenFor("monitoring", "prometheus", "https://kubernetes.default.svc"));
  EXPECT_EQ(for_api.status, 401) << for_api.body;
  Scrape elsewhere = GetMetrics(server, kube_.TokenFor("monitoring", "prometheus", "vault"));
  EXPECT_EQ(elsewhere.status, 401) << elsewhere.body;
  // A forgery shaped as a JWT, a user's token, no token.
  Scrape forged = GetMetrics(server, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwcm9tZXRoZXVzIn0.c2lnbmF0dXJlLW5vdC12YWxpZA");
  EXPECT_EQ(forged.status, 401) << forged.body;
  EXPECT_EQ(GetMetrics(server, kAliceToken).status, 403);
  EXPECT_EQ(GetMetrics(server, "").status, 401);
  for (const Scrape* refused : {&nosy, &cluster_scraper, &agent, &for_api, &elsewhere, &forged}) {
    EXPECT_EQ(refused->body.find("gantry_jobs"), std::string::npos) << "no figure leaks in a refusal";
  }
  // An admin's token still reads it.
  EXPECT_EQ(GetMetrics(server, kRootToken).status, 200);
  // The refusal of an account the cluster knows is in the audit log.
  auto audit = server.Client(kRootToken).Get("/v1/audit?limit=100");
  ASSERT_TRUE(audit);
  EXPECT_NE(audit->body.find("monitoring:nosy may not read"), std::string::npos) << audit->body;
}

}  // namespace
}  // namespace gantry::testing
