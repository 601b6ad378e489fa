// TokenReview and the pod it names: a Kubernetes agent token to the one node it speaks for.
#include "kube/agent_identity.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

KubeAgentVerifier::KubeAgentVerifier(KubeConfig config, KubeAgentPolicy policy)
    : client_(std::move(config)), policy_(std::move(policy)) {}

bool KubeAgentVerifier::LooksLikeJwt(const std::string& token) {
  if (token.size() < 20 || token.size() > 8192) return false;
  int dots = 0;
  for (char c : token) {
    if (c == '.') {
      ++dots;
    } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return false;
    }
  }
  return dots == 2 && token.front() != '.' && token.back() != '.';
}

int64_t JwtExpiry(const std::string& token) {
  size_t a = token.find('.');
  size_t b = a == std::string::npos ? a : token.find('.', a + 1);
  if (b == std::string::npos) return 0;
  std::string payload = token.substr(a + 1, b - a - 1);
  for (char& c : payload) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (payload.size() % 4) payload += '=';
  std::string text;
  if (!Base64Decode(payload, &text)) return 0;
  return IntAt(nlohmann::json::parse(text, nullptr, false), "exp");
}

Expected<KubeAgentIdentity> KubeAgentVerifier::Verify(const std::string& token, const std::string& client) {
  if (!LooksLikeJwt(token)) return Status(StatusCode::kUnauthenticated, "not a Kubernetes service account token");
  using SteadyClock = std::chrono::steady_clock;
  const std::string key = Sha256Hex(token);
  std::unique_lock<std::mutex> lock(mu_);
  // A token verified before and not expired yet: its node, while it cannot be checked now.
  auto stale = [&]() -> const Expected<KubeAgentIdentity>* {
    auto it = cache_.find(key);
    bool usable = it != cache_.end() && it->second.answer.ok() && it->second.expires > std::chrono::system_clock::now();
    return usable ? &it->second.answer : nullptr;
  };
  for (;;) {
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.until > SteadyClock::now()) return it->second.answer;
    if (!in_flight_.count(key)) break;
    if (const auto* known = stale()) return *known;
    // Another request is asking about this very token: wait for its answer.
    if (!reviewed_.wait_for(lock, std::chrono::seconds(5), [&] { return !in_flight_.count(key); })) {
      return Status(StatusCode::kUnavailable, "the Kubernetes API server is slow to check agent tokens: try again");
    }
  }
  auto mine = client_reviewing_.find(client);
  const bool client_busy = mine != client_reviewing_.end() && mine->second >= kMaxReviewingPerClient;
  if (client_busy || static_cast<int>(in_flight_.size()) >= kMaxReviewing) {
    if (const auto* known = stale()) return *known;
    return Status(StatusCode::kUnavailable, client_busy ? "an agent token from this address is being checked: try again"
                                                        : "too many agent tokens being checked at once: try again");
  }
  in_flight_.insert(key);
  ++client_reviewing_[client];
  lock.unlock();
  Expected<KubeAgentIdentity> answer = Review(token);
  lock.lock();
  in_flight_.erase(key);
  if (--client_reviewing_[client] == 0) client_reviewing_.erase(client);
  reviewed_.notify_all();
  if (!answer && answer.status().code() == StatusCode::kUnavailable) {
    if (const auto* known = stale()) return *known;  // the API server is down: the token stays trusted
    return answer;                                   // ask again next time
  }
  auto now = SteadyClock::now();
  auto wall = std::chrono::system_clock::now();
  auto expires = std::chrono::system_clock::time_point(std::chrono::seconds(JwtExpiry(token)));
  auto trusted = policy_.valid_for;
  if (answer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(expires - wall);
    trusted = std::max(std::chrono::milliseconds(0), std::min(trusted, left));
  }
  if (cache_.size() >= kMaxCached) {  // the expired go first, then the refused ones
    for (auto e = cache_.begin(); e != cache_.end();) e = e->second.until <= now ? cache_.erase(e) : std::next(e);
    for (auto e = cache_.begin(); e != cache_.end() && cache_.size() >= kMaxCached;) {
      e = e->second.answer.ok() ? std::next(e) : cache_.erase(e);
    }
  }
  if (cache_.size() < kMaxCached) {
    cache_.insert_or_assign(key, Cached{now + (answer ? trusted : policy_.refused_for), answer, expires});
  }
  return answer;
}

Expected<KubeAgentIdentity> KubeAgentVerifier::Review(const std::string& token) {
  nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"},
                           {"kind", "TokenReview"},
                           {"spec", {{"token", token}, {"audiences", {policy_.audience}}}}};
  auto r = client_.Post("/apis/authentication.k8s.io/v1/tokenreviews", review);
  if (!r) return r.status();
  if (!r->ok()) {
    return Status(StatusCode::kUnavailable, "the API server refused the token review (" + r->Error() + ")");
  }
  auto bound = PodOfReview(ObjectAt(r->body, "status"), policy_);
  if (!bound) return bound.status();
  auto got = client_.Get(fmt::format("/api/v1/namespaces/{}/pods/{}", UrlEncode(policy_.ns), UrlEncode(bound->name)));
  if (!got) return got.status();
  if (got->status == 404) return Status::Denied("Authorization", "the token's pod " + bound->name + " is gone");
  if (!got->ok()) return Status(StatusCode::kUnavailable, "cannot read the token's pod: " + got->Error());
  return IdentityOfPod(got->body, *bound, policy_);
}

Expected<BoundPod> PodOfReview(const nlohmann::json& status, const KubeAgentPolicy& policy) {
  if (!BoolAt(status, "authenticated")) {
    return Status(StatusCode::kUnauthenticated, "the Kubernetes API server does not take this token");
  }
  // An authenticator that checks audiences says which it found; one that says none is
  // taken at the review's word (the review asked for this audience only).
  const nlohmann::json& audiences = ArrayAt(status, "audiences");
  if (!audiences.empty() && std::find(audiences.begin(), audiences.end(), policy.audience) == audiences.end()) {
    return Status(StatusCode::kUnauthenticated, "the token is not for audience " + policy.audience);
  }
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

Expected<KubeAgentIdentity> IdentityOfPod(const nlohmann::json& pod, const BoundPod& bound,
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
  return KubeAgentIdentity{node, policy.ns + "/" + bound.name,
                           fmt::format("system:serviceaccount:{}:{}", policy.ns, policy.service_account)};
}

}  // namespace gantry
