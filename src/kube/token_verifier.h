// Bearer tokens that the Kubernetes API server vouches for (a TokenReview, and whatever a
// kind of token needs besides): the answers kept by the token's hash, and the limits that
// keep a flood of made-up tokens from holding every review. What a token must be to pass is
// the subclass's Review: a node agent's (kube/agent_identity.h), a metrics reader's
// (kube/metrics_reader.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "kube/kube_client.h"

namespace gantry {

// Whom a verified token speaks for: its service account, and for an agent its pod and node.
struct KubeTokenIdentity {
  std::string user;  // system:serviceaccount:NS:NAME
  std::string node;  // an agent's: spec.nodeName of the pod the token is bound to
  std::string pod;   // an agent's: namespace/name
};

// The expiry ("exp", seconds since the epoch) in a JWT's payload, read without checking its
// signature (the API server does that); 0 when there is none.
int64_t JwtExpiry(const std::string& token);

// How long answers are kept and how many reviews may hold request workers.
struct KubeReviewLimits {
  // A verified answer is trusted for `valid_for` (never past the token's own expiry), a
  // refused one for `refused_for`, without asking again.
  std::chrono::milliseconds valid_for{60000};
  std::chrono::milliseconds refused_for{10000};
  // While the API server cannot answer (not while it is merely being asked), a verified
  // answer stands in this long past `valid_for`, never past the token's expiry; 0: never.
  std::chrono::milliseconds stale_for{0};
  // Reviews, and requests waiting for another's review of the same token, at once in all:
  // each holds a request worker. One per client address.
  int max_busy = 8;
  // Tokens not seen before that one client address may have reviewed in a minute: each
  // made-up token costs the API server a review, so a flood is cut to this rate.
  int reviews_per_minute_per_client = 600;
};

// Whether a TokenReview's status (`review_status`) says the API server took the token for
// `audience`: an authenticator that checks audiences says which it found; one that says none
// is taken at the review's word (the review asked for this audience only). Pure (fuzzed).
Status TakenForAudience(const nlohmann::json& review_status, const std::string& audience);

class KubeTokenVerifier {
 public:
  KubeTokenVerifier(KubeConfig config, KubeReviewLimits limits);
  virtual ~KubeTokenVerifier();

  // Whether `token` is likely a Kubernetes token at all (a JWT: three base64url parts), so
  // that other bearer tokens never reach the API server.
  static bool LooksLikeJwt(const std::string& token);
  // Whom the token speaks for, or why not: kUnauthenticated when the API server does not
  // take the token (expired, another audience, its pod deleted), kPermissionDenied when it
  // is not one this verifier accepts, kUnavailable when it cannot be asked now (the caller
  // may try again). Answers are kept by the token's SHA-256. One review per token at a time
  // (others wait for it), and one review or wait per `client` (the caller's address) and
  // `max_busy` in all at once: a flood from one address holds one worker and never the
  // others' reviews (its further requests get kUnavailable at once). A request that finds
  // the verifier busy gets kUnavailable, never a kept answer past its time, so a revoked
  // token is checked again as soon as anyone can be. Why the API server could not answer is
  // not passed on (the caller may be anyone).
  Expected<KubeTokenIdentity> Verify(const std::string& token, const std::string& client = "");

 protected:
  // Asks the API server about `token` (on the caller's thread).
  virtual Expected<KubeTokenIdentity> Review(const std::string& token) = 0;
  // Posts a TokenReview of `token` for `audience`: the review's status, or kUnavailable when
  // the API server cannot answer it.
  Expected<nlohmann::json> AskTokenReview(const std::string& token, const std::string& audience);
  KubeClient client_;

 private:
  KubeReviewLimits limits_;
  // Takes one of `client`'s and one of the total busy slots, or says why there is none.
  Status Admit(const std::string& client);
  // Counts a review for `client` in this minute's window, or says it has had its share.
  Status CountReview(const std::string& client);
  void Release(const std::string& client);
  struct Cached {
    std::chrono::steady_clock::time_point until;  // trusted until then without asking
    Expected<KubeTokenIdentity> answer;
    std::chrono::system_clock::time_point expires;  // the token's own expiry (verified ones)
  };
  std::mutex mu_;
  std::condition_variable reviewed_;
  std::map<std::string, Cached> cache_;
  std::set<std::string> in_flight_;         // tokens (hashes) under review
  std::map<std::string, int> client_busy_;  // reviews and waits per client address
  int busy_ = 0;                            // reviews and waits in all
  struct ReviewWindow {
    std::chrono::steady_clock::time_point start;
    int reviews = 0;
  };
  std::map<std::string, ReviewWindow> client_reviews_;  // this minute's reviews per client address
  static constexpr size_t kMaxWindows = 20000;
  static constexpr size_t kMaxCached = 20000;
  static constexpr int kMaxBusyPerClient = 1;
};

}  // namespace gantry
