// TokenReview and the pod it names: a Kubernetes agent token to the one node it speaks for.
#include "kube/agent_identity.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

KubeAgentVerifier::KubeAgentVerifier(KubeConfig config, KubeAgentPolicy policy)
    : KubeTokenVerifier(std::move(config), policy.limits), policy_(std::move(policy)) {}

Expected<KubeTokenIdentity> KubeAgentVerifier::Review(const std::string& token) {
  auto status = AskTokenReview(token, policy_.audience);
  if (!status) return status.status();
  auto bound = PodOfReview(*status, policy_);
  if (!bound) return bound.status();
  auto got = client_.Get(fmt::format("/api/v1/namespaces/{}/pods/{}", UrlEncode(policy_.ns), UrlEncode(bound->name)));
  if (!got) return got.status();
  if (got->status == 404) return Status::Denied("Authorization", "the token's pod " + bound->name + " is gone");
  if (!got->ok()) return Status(StatusCode::kUnavailable, "cannot read the token's pod: " + got->Error());
  return IdentityOfPod(got->body, *bound, policy_);
}

Expected<BoundPod> PodOfReview(const nlohmann::json& status, const KubeAgentPolicy& policy) {
  if (Status taken = TakenForAudience(status, policy.audience); !taken.ok()) return taken;
  const nlohmann::json& user = ObjectAt(status, "user");
  const std::string name = StringAt(user, "username");
  const std::string expected = fmt::format("system:serviceaccount:{}:{}", policy.ns, policy.service_account);
  if (name != expected) {
    return Status::Denied("Authorization", fmt::format("the token is {}'s, not the node agents' ({})", name, expected));
  }
  // A bound token names its pod in the review's extra fields; a legacy Secret token names none.
  const nlohmann::json& extra = ObjectAt(user, "extra");
  auto first = [&](const char* key) -> std::string {
    const nlohmann::json& values = ArrayAt(extra, key);
    return !values.empty() && values.front().is_string() ? values.front().get<std::string>() : "";
  };
  BoundPod pod{first("authentication.kubernetes.io/pod-name"), first("authentication.kubernetes.io/pod-uid")};
  if (pod.name.empty() || pod.uid.empty()) {
    return Status::Denied("Authorization", "the token is bound to no pod (use the pod's projected token)");
  }
  return pod;
}

Expected<KubeTokenIdentity> IdentityOfPod(const nlohmann::json& pod, const BoundPod& bound,
                                          const KubeAgentPolicy& policy) {
  const nlohmann::json& meta = ObjectAt(pod, "metadata");
  const std::string node = StringAt(ObjectAt(pod, "spec"), "nodeName");
  const std::string phase = StringAt(ObjectAt(pod, "status"), "phase");
  if (StringAt(meta, "uid") != bound.uid) {
    return Status::Denied("Authorization", "the token's pod " + bound.name + " was replaced by another of that name");
  }
  if (node.empty()) return Status::Denied("Authorization", "the token's pod " + bound.name + " is on no node yet");
  if (phase == "Succeeded" || phase == "Failed" || meta.contains("deletionTimestamp")) {
    return Status::Denied("Authorization", "the token's pod " + bound.name + " has ended");
  }
  return KubeTokenIdentity{fmt::format("system:serviceaccount:{}:{}", policy.ns, policy.service_account), node,
                           policy.ns + "/" + bound.name};
}

}  // namespace gantry
