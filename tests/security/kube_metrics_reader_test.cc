// /metrics carries every team's jobs and costs. On Kubernetes, with --metrics-need-token,
// besides Gantry admins only a service account that the cluster's RBAC lets `get` /metrics
// may read it (TokenReview, then SubjectAccessReview, as the cluster's own components check
// their scrapers). The attacks: a service account of another namespace without the role, a
// node agent's token, the reader's own token minted for another audience, a JWT-shaped
// forgery, a user's token and no token at all.
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
  // The cluster admin binds the manifests' reader role to Prometheus (docs/KUBERNETES.md).
  std::string out;
  ASSERT_EQ(kube_.Kubectl("create clusterrolebinding gantry-metrics --clusterrole=gantry-metrics-reader "
                          "--serviceaccount=monitoring:prometheus",
                          &out),
            0)
      << out;

  const std::string dir = TempPath("kube-metrics-readers");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "");
  StartOnKube(server, kube_, dir, {"--metrics-need-token"});

  const std::string api_audience = "https://kubernetes.default.svc";
  const std::string prometheus = kube_.TokenFor("monitoring", "prometheus", api_audience);
  ASSERT_FALSE(prometheus.empty());
  Scrape allowed = GetMetrics(server, prometheus);
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_NE(allowed.body.find("gantry_"), std::string::npos) << allowed.body;
  EXPECT_EQ(GetMetrics(server, prometheus).status, 200) << "asked again: the kept answer";

  // An account the role is not bound to: the cluster's answer, and what would allow it.
  Scrape nosy = GetMetrics(server, kube_.TokenFor("monitoring", "nosy", api_audience));
  EXPECT_EQ(nosy.status, 403) << nosy.body;
  EXPECT_NE(nosy.body.find("system:serviceaccount:monitoring:nosy may not get /metrics"), std::string::npos)
      << nosy.body;
  // A node agent's projected token (audience gantry): not a token the API server takes for itself.
  nlohmann::json pod = AgentPod(kube_, "gantry-system", "gantry-agent-a", "node-a");
  Scrape agent = GetMetrics(server, kube_.TokenFor("gantry-system", "gantry-agent", "gantry", pod));
  EXPECT_EQ(agent.status, 401) << agent.body;
  // Prometheus's own account, its token minted for another audience.
  Scrape elsewhere = GetMetrics(server, kube_.TokenFor("monitoring", "prometheus", "vault"));
  EXPECT_EQ(elsewhere.status, 401) << elsewhere.body;
  // A forgery shaped as a JWT, a user's token, no token.
  Scrape forged = GetMetrics(server, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwcm9tZXRoZXVzIn0.c2lnbmF0dXJlLW5vdC12YWxpZA");
  EXPECT_EQ(forged.status, 401) << forged.body;
  EXPECT_EQ(GetMetrics(server, kAliceToken).status, 403);
  EXPECT_EQ(GetMetrics(server, "").status, 401);
  for (const Scrape* refused : {&nosy, &agent, &elsewhere, &forged}) {
    EXPECT_EQ(refused->body.find("gantry_jobs"), std::string::npos) << "no figure leaks in a refusal";
  }
  // An admin's token still reads it.
  EXPECT_EQ(GetMetrics(server, kRootToken).status, 200);
}

}  // namespace
}  // namespace gantry::testing
