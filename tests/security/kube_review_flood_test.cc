// A flood of made-up Kubernetes tokens from one address must not hold every TokenReview
// slot: each address has one review in flight at a time (its next tokens get 503 at once),
// so another node's agent is still checked. Against a scripted API server whose reviews
// wait until the test lets them answer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <condition_variable>
#include <future>
#include <thread>

#include "kube/agent_identity.h"

namespace gantry::testing {
namespace {

// Answers TokenReviews ("not authenticated") once released; counts those waiting.
class HeldReviews {
 public:
  HeldReviews() {
    server_.Post(
        "/apis/authentication.k8s.io/v1/tokenreviews", [this](const httplib::Request&, httplib::Response& res) {
          std::unique_lock<std::mutex> lock(mu_);
          ++waiting_;
          changed_.notify_all();
          changed_.wait_for(lock, std::chrono::seconds(20), [this] { return released_; });
          --waiting_;
          res.set_content(R"({"kind": "TokenReview", "status": {"authenticated": false}})", "application/json");
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

TEST(KubeReviewFlood, OneAddressHoldsOneReviewAndAnotherNodeIsStillChecked) {
  HeldReviews api;
  KubeConfig config;
  config.url = api.url();
  KubeAgentVerifier verifier(config, KubeAgentPolicy{});

  // The attacker's first made-up token is under review...
  auto first = std::async(std::launch::async, [&] { return verifier.Verify(MadeUpToken(0), "10.0.0.66"); });
  ASSERT_TRUE(api.AwaitWaiting(1));
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

}  // namespace
}  // namespace gantry::testing
