// KubeMetricsReaderVerifier: a TokenReview for the audience gantry-metrics, then a
// SubjectAccessReview for `get` on gantry.io/metrics.
#include "kube/metrics_reader.h"

#include <fmt/format.h>

#include <algorithm>

namespace gantry {

Expected<nlohmann::json> AccessReviewFor(const nlohmann::json& status, const KubeMetricsReaderPolicy& policy) {
  if (Status taken = TakenForAudience(status, policy.audience); !taken.ok()) return taken;
  const nlohmann::json& user = ObjectAt(status, "user");
  const std::string name = StringAt(user, "username");
  if (name.empty()) return Status(StatusCode::kUnauthenticated, "the token review names no user");
  nlohmann::json spec = {
      {"user", name},
      {"resourceAttributes",
       {{"namespace", policy.ns}, {"verb", "get"}, {"group", "gantry.io"}, {"resource", "metrics"}}}};
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : ArrayAt(user, "groups")) {
    if (g.is_string()) groups.push_back(g);
  }
  if (!groups.empty()) spec["groups"] = groups;
  if (!StringAt(user, "uid").empty()) spec["uid"] = StringAt(user, "uid");
  // Extra fields are string lists (the bound pod's name, the credential's id): others dropped.
  nlohmann::json extra = nlohmann::json::object();
  for (const auto& [key, values] : ObjectAt(user, "extra").items()) {
    if (!values.is_array()) continue;
    nlohmann::json strings = nlohmann::json::array();
    for (const auto& v : values) {
      if (v.is_string()) strings.push_back(v);
    }
    extra[key] = strings;
  }
  if (!extra.empty()) spec["extra"] = extra;
  return nlohmann::json{
      {"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", std::move(spec)}};
}

KubeMetricsReaderVerifier::KubeMetricsReaderVerifier(KubeConfig config, KubeMetricsReaderPolicy policy)
    : KubeTokenVerifier(std::move(config), policy.limits), policy_(std::move(policy)) {}

Expected<KubeTokenIdentity> KubeMetricsReaderVerifier::Review(const std::string& token) {
  auto status = AskTokenReview(token, policy_.audience);
  if (!status) return status.status();
  auto access = AccessReviewFor(*status, policy_);
  if (!access) return access.status();
  const std::string user = StringAt(ObjectAt(*status, "user"), "username");
  auto decided = client_.Post("/apis/authorization.k8s.io/v1/subjectaccessreviews", *access);
  if (!decided) return decided.status();
  if (!decided->ok()) {
    return Status(StatusCode::kUnavailable, "the API server refused the access review (" + decided->Error() + ")");
  }
  if (!BoolAt(ObjectAt(decided->body, "status"), "allowed")) {
    return Status::Denied("Authorization", fmt::format("{} may not read Gantry's metrics (Kubernetes RBAC: bind "
                                                       "the role gantry-metrics-reader in {})",
                                                       user, policy_.ns));
  }
  return KubeTokenIdentity{user, "", ""};
}

}  // namespace gantry
