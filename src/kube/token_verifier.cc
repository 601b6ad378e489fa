// KubeTokenVerifier: the kept answers, the review limits, and reading a JWT's expiry.
#include "kube/token_verifier.h"

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

KubeTokenVerifier::KubeTokenVerifier(KubeConfig config, KubeReviewLimits limits)
    : client_(std::move(config)), limits_(limits) {}

KubeTokenVerifier::~KubeTokenVerifier() = default;

bool KubeTokenVerifier::LooksLikeJwt(const std::string& token) {
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

Status TakenForAudience(const nlohmann::json& status, const std::string& audience) {
  if (!BoolAt(status, "authenticated")) {
    return Status(StatusCode::kUnauthenticated, "the Kubernetes API server does not take this token");
  }
  const nlohmann::json& audiences = ArrayAt(status, "audiences");
  if (!audiences.empty() && std::find(audiences.begin(), audiences.end(), audience) == audiences.end()) {
    return Status(StatusCode::kUnauthenticated, "the token is not for audience " + audience);
  }
  return Status::Ok();
}

Expected<nlohmann::json> KubeTokenVerifier::AskTokenReview(const std::string& token, const std::string& audience) {
  nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"},
                           {"kind", "TokenReview"},
                           {"spec", {{"token", token}, {"audiences", {audience}}}}};
  auto r = client_.Post("/apis/authentication.k8s.io/v1/tokenreviews", review);
  if (!r) return r.status();
  if (!r->ok()) return Status(StatusCode::kUnavailable, "the API server refused the token review (" + r->Error() + ")");
  return ObjectAt(r->body, "status");
}

Status KubeTokenVerifier::Admit(const std::string& client) {
  auto mine = client_busy_.find(client);
  if (mine != client_busy_.end() && mine->second >= kMaxBusyPerClient) {
    return Status(StatusCode::kUnavailable, "a token from this address is being checked: try again");
  }
  if (busy_ >= limits_.max_busy) {
    return Status(StatusCode::kUnavailable, "too many tokens being checked at once: try again");
  }
  ++client_busy_[client];
  ++busy_;
  return Status::Ok();
}

Status KubeTokenVerifier::CountReview(const std::string& client) {
  const auto now = std::chrono::steady_clock::now();
  if (client_reviews_.size() >= kMaxWindows) {  // windows of a minute ago go
    for (auto w = client_reviews_.begin(); w != client_reviews_.end();) {
      w = now - w->second.start >= std::chrono::minutes(1) ? client_reviews_.erase(w) : std::next(w);
    }
  }
  ReviewWindow& window = client_reviews_[client];
  if (now - window.start >= std::chrono::minutes(1)) window = {now, 0};
  if (window.reviews >= limits_.reviews_per_minute_per_client) {
    return Status(StatusCode::kUnavailable, "too many new tokens from this address this minute: try again later");
  }
  ++window.reviews;
  return Status::Ok();
}

void KubeTokenVerifier::Release(const std::string& client) {
  if (--client_busy_[client] == 0) client_busy_.erase(client);
  --busy_;
}

Expected<KubeTokenIdentity> KubeTokenVerifier::Verify(const std::string& token, const std::string& client) {
  if (!LooksLikeJwt(token)) return Status(StatusCode::kUnauthenticated, "not a Kubernetes service account token");
  using SteadyClock = std::chrono::steady_clock;
  const std::string key = Sha256Hex(token);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.until > SteadyClock::now()) return it->second.answer;
    if (!in_flight_.count(key)) break;
    // Another request is asking about this very token: wait for its answer, which holds a
    // worker as a review does.
    if (Status admitted = Admit(client); !admitted.ok()) return admitted;
    bool answered = reviewed_.wait_for(lock, std::chrono::seconds(5), [&] { return !in_flight_.count(key); });
    Release(client);
    if (!answered)
      return Status(StatusCode::kUnavailable, "the Kubernetes API server is slow to check tokens: try again");
  }
  if (Status admitted = Admit(client); !admitted.ok()) return admitted;
  if (Status counted = CountReview(client); !counted.ok()) {
    Release(client);
    return counted;
  }
  in_flight_.insert(key);
  lock.unlock();
  Expected<KubeTokenIdentity> answer = Review(token);
  lock.lock();
  in_flight_.erase(key);
  Release(client);
  reviewed_.notify_all();
  auto now = SteadyClock::now();
  auto wall = std::chrono::system_clock::now();
  if (!answer && answer.status().code() == StatusCode::kUnavailable) {
    // The API server cannot answer: a verified answer stands in for a while, so an outage
    // does not cut working agents off.
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.answer.ok() && it->second.expires > wall &&
        now < it->second.until + limits_.stale_for) {
      return it->second.answer;
    }
    // Ask again next time. The API server's address and words stay here: the caller may
    // be anyone.
    return Status(StatusCode::kUnavailable, "the Kubernetes API server cannot check the token now: try again");
  }
  auto expires = std::chrono::system_clock::time_point(std::chrono::seconds(JwtExpiry(token)));
  auto trusted = limits_.valid_for;
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
    cache_.insert_or_assign(key, Cached{now + (answer ? trusted : limits_.refused_for), answer, expires});
  }
  return answer;
}

}  // namespace gantry
