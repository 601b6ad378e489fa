// A flood of made-up Kubernetes tokens from one address must not hold every TokenReview
// slot: each address has one review (or wait for one) in flight at a time (its next
// requests get 503 at once, copies of the token under review included), so another node's
// agent is still checked. And a token let in before is not let in again on its kept answer
// while the reviews are busy: a metrics reader whose access was taken away is refused as
// soon as it can be asked. Against scripted API servers whose reviews wait until the test
// lets them answer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <thread>

#include "kube/agent_identity.h"
#include "kube/metrics_reader.h"

namespace gantry::testing {
namespace {

// Answers TokenReviews ("not authenticated") once released; counts those waiting. Tokens
// that start with "reader." are a metrics reader's, answered at once (authenticated), and
// the SubjectAccessReview allows them while `allowed` says so.
class HeldReviews {
 public:
  HeldReviews() {
    server_.Post(
        "/apis/authentication.k8s.io/v1/tokenreviews", [this](const httplib::Request& req, httplib::Response& res) {
          auto token = nlohmann::json::parse(req.body)["spec"].value("token", "");
          if (token.rfind("reader.", 0) == 0) {
            return res.set_content(
                R"({"status": {"authenticated": true, "audiences": ["gantry-metrics"],
                             "user": {"username": "system:serviceaccount:monitoring:prometheus"}}})",
                "application/json");
          }
          ++reviews;
          std::unique_lock<std::mutex> lock(mu_);
          ++waiting_;
          changed_.notify_all();
          changed_.wait_for(lock, std::chrono::seconds(20), [this] { return released_; });
          --waiting_;
          res.set_content(R"({"kind": "TokenReview", "status": {"authenticated": false}})", "application/json");
        });
    server_.Post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews", [this](const httplib::Request&, httplib::Response& res) {
          res.set_content(nlohmann::json{{"status", {{"allowed", allowed.load()}}}}.dump(), "application/json");
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HeldReviews() {
    Release();
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<bool> allowed{true};
  std::atomic<int> reviews{0};  // token reviews asked of it (the reader's excepted)
  // Waits until `n` reviews are held; false after 10 s.
  bool AwaitWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool released_ = false;
};

// A JWT-shaped token that differs by `n` (no API server would take it).
std::string MadeUpToken(int n) { return "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.forged-signature-" + std::to_string(n); }
// A metrics reader's JWT-shaped token (the scripted API server takes it).
const std::string kReaderToken = "reader.eyJzdWIiOiJwcm9tZXRoZXVzIn0.signature";

KubeConfig ConfigFor(const HeldReviews& api) {
  KubeConfig config;
  config.url = api.url();
  return config;
}

// `verifier`'s review of `token` for `client`, under way: returns once the API server holds it.
std::future<Expected<KubeTokenIdentity>> Held(HeldReviews& api, KubeTokenVerifier& verifier, const std::string& token,
                                              const std::string& client) {
  auto review = std::async(std::launch::async, [&verifier, token, client] { return verifier.Verify(token, client); });
  EXPECT_TRUE(api.AwaitWaiting(1));
  return review;
}

TEST(KubeReviewFlood, OneAddressHoldsOneReviewAndAnotherNodeIsStillChecked) {
  HeldReviews api;
  KubeAgentVerifier verifier(ConfigFor(api), KubeAgentPolicy{});

  // The attacker's first made-up token is under review...
  auto first = Held(api, verifier, MadeUpToken(0), "10.0.0.66");
  // ...and its next ones are turned away at once, without asking the API server.
  for (int i = 1; i <= 5; ++i) {
    auto more = verifier.Verify(MadeUpToken(i), "10.0.0.66");
    ASSERT_FALSE(more.ok());
    EXPECT_EQ(more.status().code(), StatusCode::kUnavailable) << more.status().ToString();
    EXPECT_NE(more.status().message().find("this address"), std::string::npos) << more.status().ToString();
  }
  EXPECT_EQ(api.waiting(), 1);

  // Another node's agent is still checked (with one global slot per address it would be
  // turned away too once the flood held them all).
  auto other = std::async(std::launch::async, [&] { return verifier.Verify(MadeUpToken(100), "10.0.0.7"); });
  ASSERT_TRUE(api.AwaitWaiting(2));
  api.Release();
  auto answer = other.get();
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnauthenticated) << answer.status().ToString();
  EXPECT_EQ(first.get().status().code(), StatusCode::kUnauthenticated);

  // Once its review is answered, the address may ask again (and a refused token is
  // remembered: no second review for it).
  auto again = verifier.Verify(MadeUpToken(1), "10.0.0.66");
  EXPECT_EQ(again.status().code(), StatusCode::kUnauthenticated) << again.status().ToString();
}

TEST(KubeReviewFlood, CopiesOfATokenUnderReviewFromOneAddressHoldNoMoreWorkers) {
  HeldReviews api;
  KubeAgentVerifier verifier(ConfigFor(api), KubeAgentPolicy{});
  auto first = Held(api, verifier, MadeUpToken(0), "10.0.0.66");
  // The same token again from the same address: turned away at once, not left waiting on
  // a request worker for the first one's answer.
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    auto copy = verifier.Verify(MadeUpToken(0), "10.0.0.66");
    EXPECT_EQ(copy.status().code(), StatusCode::kUnavailable) << copy.status().ToString();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << "none waited";
  // From another address, a copy waits for the one review and shares its answer.
  auto other = std::async(std::launch::async, [&] { return verifier.Verify(MadeUpToken(0), "10.0.0.7"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(api.waiting(), 1) << "one review for the token";
  api.Release();
  EXPECT_EQ(other.get().status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(first.get().status().code(), StatusCode::kUnauthenticated);
}

TEST(KubeReviewFlood, AReaderWhoseAccessWasTakenAwayIsNotLetInOnAKeptAnswerWhileReviewsAreBusy) {
  HeldReviews api;
  KubeMetricsReaderPolicy policy;
  policy.limits.valid_for = std::chrono::milliseconds(50);
  KubeMetricsReaderVerifier readers(ConfigFor(api), policy);
  ASSERT_TRUE(readers.Verify(kReaderToken, "10.0.0.66").ok());
  api.allowed = false;  // the binding is removed
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The same address keeps a review busy with a made-up token, then shows the old token.
  auto held = Held(api, readers, MadeUpToken(0), "10.0.0.66");
  auto busy = readers.Verify(kReaderToken, "10.0.0.66");
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable) << "not the kept 'allowed'";
  api.Release();
  held.get();
  auto asked = readers.Verify(kReaderToken, "10.0.0.66");
  EXPECT_EQ(asked.status().code(), StatusCode::kPermissionDenied) << asked.status().ToString();
}

TEST(KubeReviewFlood, NewTokensFromOneAddressAreReviewedAtMostSoManyAMinute) {
  HeldReviews api;
  api.Release();  // reviews answer at once
  KubeAgentPolicy policy;
  policy.limits.reviews_per_minute_per_client = 3;
  KubeAgentVerifier verifier(ConfigFor(api), policy);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(verifier.Verify(MadeUpToken(i), "10.0.0.66").status().code(), StatusCode::kUnauthenticated);
  }
  auto cut = verifier.Verify(MadeUpToken(3), "10.0.0.66");
  EXPECT_EQ(cut.status().code(), StatusCode::kUnavailable) << cut.status().ToString();
  EXPECT_NE(cut.status().message().find("this minute"), std::string::npos) << cut.status().ToString();
  // A token refused before is answered from memory, and another address is reviewed.
  EXPECT_EQ(verifier.Verify(MadeUpToken(1), "10.0.0.66").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(verifier.Verify(MadeUpToken(4), "10.0.0.7").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(api.reviews, 4) << "the cut token never reached the API server";
}

}  // namespace
}  // namespace gantry::testing
