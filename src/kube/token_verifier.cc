// KubeTokenVerifier: the kept answers, the review limits, and reading a JWT's expiry.
#include "kube/token_verifier.h"

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

KubeTokenVerifier::KubeTokenVerifier(KubeConfig config, std::chrono::milliseconds valid_for,
                                     std::chrono::milliseconds refused_for)
    : client_(std::move(config)), valid_for_(valid_for), refused_for_(refused_for) {}

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

Expected<KubeTokenIdentity> KubeTokenVerifier::Verify(const std::string& token, const std::string& client) {
  if (!LooksLikeJwt(token)) return Status(StatusCode::kUnauthenticated, "not a Kubernetes service account token");
  using SteadyClock = std::chrono::steady_clock;
  const std::string key = Sha256Hex(token);
  std::unique_lock<std::mutex> lock(mu_);
  // A token verified before and not expired yet: its node, while it cannot be checked now.
  auto stale = [&]() -> const Expected<KubeTokenIdentity>* {
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
      return Status(StatusCode::kUnavailable, "the Kubernetes API server is slow to check tokens: try again");
    }
  }
  auto mine = client_reviewing_.find(client);
  const bool client_busy = mine != client_reviewing_.end() && mine->second >= kMaxReviewingPerClient;
  if (client_busy || static_cast<int>(in_flight_.size()) >= kMaxReviewing) {
    if (const auto* known = stale()) return *known;
    return Status(StatusCode::kUnavailable, client_busy ? "a token from this address is being checked: try again"
                                                        : "too many tokens being checked at once: try again");
  }
  in_flight_.insert(key);
  ++client_reviewing_[client];
  lock.unlock();
  Expected<KubeTokenIdentity> answer = Review(token);
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
  auto trusted = valid_for_;
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
    cache_.insert_or_assign(key, Cached{now + (answer ? trusted : refused_for_), answer, expires});
  }
  return answer;
}

}  // namespace gantry
