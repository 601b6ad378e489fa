// Who may scrape /metrics on Kubernetes: an account the cluster's RBAC lets `get` the
// resource `metrics` of API group `gantry.io` in Gantry's namespace, showing a token made
// for Gantry's metrics alone (audience `gantry-metrics`, a projected token in the scraper's
// pod). It is delegated authentication and authorization, as the cluster's components do
// it for their own endpoints (a TokenReview, then a SubjectAccessReview), with an audience
// and a resource of Gantry's own: a token that leaks from a scrape is good for nothing else,
// and no permission the cluster already grants (its own /metrics) reads every team's costs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kube/token_verifier.h"

namespace gantry {

struct KubeMetricsReaderPolicy {
  std::string ns = "gantry-system";         // the namespace the access review names
  std::string audience = "gantry-metrics";  // the audience a reader's token must carry
  // No kept answer stands in while the API server cannot answer: a scrape may fail then.
  // Two reviews at once at most: scrapes are few, and each holds a request worker.
  KubeReviewLimits limits{std::chrono::seconds(60), std::chrono::seconds(10), std::chrono::milliseconds(0), 2};
};

// The SubjectAccessReview for the user a TokenReview's status names (`review_status`): `get`
// on `metrics` in group `gantry.io` in `policy.ns`, with the user's groups, uid and extra
// fields as the review gave them. An error when the review did not authenticate the token
// for `policy.audience`. Pure (fuzzed).
Expected<nlohmann::json> AccessReviewFor(const nlohmann::json& review_status, const KubeMetricsReaderPolicy& policy);

class KubeMetricsReaderVerifier : public KubeTokenVerifier {
 public:
  KubeMetricsReaderVerifier(KubeConfig config, KubeMetricsReaderPolicy policy);

 protected:
  Expected<KubeTokenIdentity> Review(const std::string& token) override;

 private:
  KubeMetricsReaderPolicy policy_;
};

}  // namespace gantry
