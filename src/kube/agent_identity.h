// Node agents on Kubernetes prove who they are with their pod's projected service-account
// token (audience "gantry", rotated by the kubelet) instead of a hand-made agent token: the
// API server's TokenReview says whose token it is and which pod it is bound to, and that
// pod, read back, names the node it runs on. Such a token speaks for that node only.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/token_verifier.h"

namespace gantry {

struct KubeAgentPolicy {
  std::string ns = "gantry-system";              // where the agents' DaemonSet runs
  std::string service_account = "gantry-agent";  // whose tokens are agents'
  std::string audience = "gantry";               // the audience their projected tokens carry
  // Verified tokens are trusted a minute; while the API server cannot answer, an hour more
  // at most (never past their expiry), so an outage does not cut working agents off.
  KubeReviewLimits limits{std::chrono::seconds(60), std::chrono::seconds(10), std::chrono::hours(1), 8};
};

// The two judgements of a verification, apart from the calls (pure; fuzzed): what the
// TokenReview's status says (the bound pod's name and uid), and what that pod says (its
// node).
struct BoundPod {
  std::string name, uid;
};
Expected<BoundPod> PodOfReview(const nlohmann::json& review_status, const KubeAgentPolicy& policy);
Expected<KubeTokenIdentity> IdentityOfPod(const nlohmann::json& pod, const BoundPod& bound,
                                          const KubeAgentPolicy& policy);

// A node agent's token: its pod's projected service-account token of `policy`'s account
// and audience, bound to a running pod, speaks for that pod's node (KubeTokenIdentity's
// node and pod).
class KubeAgentVerifier : public KubeTokenVerifier {
 public:
  KubeAgentVerifier(KubeConfig config, KubeAgentPolicy policy);

 protected:
  Expected<KubeTokenIdentity> Review(const std::string& token) override;

 private:
  KubeAgentPolicy policy_;
};

}  // namespace gantry
