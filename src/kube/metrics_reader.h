// Who may scrape /metrics on Kubernetes: a service account the cluster's RBAC lets `get`
// the non-resource URL /metrics, as the cluster's own components decide it for theirs
// (delegated authentication and authorization: a TokenReview, then a SubjectAccessReview).
// Prometheus scrapes with its own service-account token, which most clusters already allow
// to read /metrics; no Gantry admin token has to be handed to it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kube/token_verifier.h"

namespace gantry {

// The SubjectAccessReview for the user a TokenReview's status names (`review_status`):
// `get` on the non-resource `path`, with the user's groups, uid and extra fields as the
// review gave them. An error when the review did not authenticate the token. Pure (fuzzed).
Expected<nlohmann::json> AccessReviewFor(const nlohmann::json& review_status, const std::string& path);

class KubeMetricsReaderVerifier : public KubeTokenVerifier {
 public:
  // `path`: the non-resource URL RBAC must allow (`get`).
  explicit KubeMetricsReaderVerifier(KubeConfig config, std::string path = "/metrics");

 protected:
  Expected<KubeTokenIdentity> Review(const std::string& token) override;

 private:
  std::string path_;
};

}  // namespace gantry
