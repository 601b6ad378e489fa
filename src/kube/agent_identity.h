// Node agents on Kubernetes prove who they are with their pod's projected service-account
// token (audience "gantry", rotated by the kubelet) instead of a hand-made agent token: the
// API server's TokenReview says whose token it is and which pod it is bound to, and that
// pod, read back, names the node it runs on. Such a token speaks for that node only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "kube/kube_client.h"

namespace gantry {

struct KubeAgentPolicy {
  std::string ns = "gantry-system";              // where the agents' DaemonSet runs
  std::string service_account = "gantry-agent";  // whose tokens are agents'
  std::string audience = "gantry";               // the audience their projected tokens carry
  std::chrono::milliseconds valid_for{60000};    // a verified token is trusted this long
  std::chrono::milliseconds refused_for{10000};  // a refused one is refused this long unasked
};

struct KubeAgentIdentity {
  std::string node;  // spec.nodeName of the pod the token is bound to
  std::string pod;   // namespace/name
  std::string user;  // system:serviceaccount:NS:NAME
};

// The two judgements of a verification, apart from the calls (pure; fuzzed): what the
// TokenReview's status says (the bound pod's name and uid), and what that pod says (its
// node).
struct BoundPod {
  std::string name, uid;
};
Expected<BoundPod> PodOfReview(const nlohmann::json& review_status, const KubeAgentPolicy& policy);
Expected<KubeAgentIdentity> IdentityOfPod(const nlohmann::json& pod, const BoundPod& bound,
                                          const KubeAgentPolicy& policy);

// The expiry ("exp", seconds since the epoch) in a JWT's payload, read without checking its
// signature (the API server does that); 0 when there is none.
int64_t JwtExpiry(const std::string& token);

class KubeAgentVerifier {
 public:
  KubeAgentVerifier(KubeConfig config, KubeAgentPolicy policy);

  // Whether `token` is likely a Kubernetes token at all (a JWT: three base64url parts), so
  // that other bearer tokens never reach the API server.
  static bool LooksLikeJwt(const std::string& token);
  // The node the token speaks for, or why not: kUnauthenticated when the API server does
  // not take the token (expired, another audience, its pod deleted), kPermissionDenied
  // when it is someone else's (another service account or namespace, not bound to a
  // running pod with a node), kUnavailable when it cannot be asked now (the caller may try
  // again). Answers are kept by the token's SHA-256: a verified one for `valid_for` (never
  // past the token's own expiry), a refused one for `refused_for`. One review per token at
  // a time (others wait for it), one per `client` (the caller's address) at a time, and at
  // most kMaxReviewing at once, so a flood of made-up tokens from one address holds one
  // review and never the others' (its next ones get kUnavailable at once); while the API
  // server cannot answer, or is being asked, a token verified before keeps its node until
  // it expires, so an API outage does not cut working agents off.
  Expected<KubeAgentIdentity> Verify(const std::string& token, const std::string& client = "");

 private:
  Expected<KubeAgentIdentity> Review(const std::string& token);

  KubeClient client_;
  KubeAgentPolicy policy_;
  struct Cached {
    std::chrono::steady_clock::time_point until;  // trusted until then without asking
    Expected<KubeAgentIdentity> answer;
    std::chrono::system_clock::time_point expires;  // the token's own expiry (verified ones)
  };
  std::mutex mu_;
  std::condition_variable reviewed_;
  std::map<std::string, Cached> cache_;
  std::set<std::string> in_flight_;              // tokens (hashes) under review
  std::map<std::string, int> client_reviewing_;  // reviews in flight per client address
  static constexpr size_t kMaxCached = 20000;
  static constexpr int kMaxReviewing = 8;
  static constexpr int kMaxReviewingPerClient = 1;
};

}  // namespace gantry
