// An identity provider played by a test: discovery, keys and a token endpoint on loopback
// (cpp-httplib), whose keys, answers and discovery document the test sets.
#pragma once

#include <httplib.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "identity/jwt_minter.h"

namespace gantry::testing {

class FakeProvider {
 public:
  FakeProvider() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    issuer_ = "http://127.0.0.1:" + std::to_string(port_);
    server_.Get("/.well-known/openid-configuration", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      nlohmann::json doc = {{"issuer", discovery_issuer_.empty() ? issuer_ : discovery_issuer_},
                            {"authorization_endpoint", issuer_ + "/auth"},
                            {"token_endpoint", token_endpoint_.empty() ? issuer_ + "/token" : token_endpoint_},
                            {"device_authorization_endpoint", issuer_ + "/device/auth"},
                            {"jwks_uri", issuer_ + "/jwks"}};
      res.set_content(doc.dump(), "application/json");
    });
    server_.Get("/jwks", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++jwks_fetches_;
      res.set_content(jwks_, "application/json");
    });
    server_.Post("/token", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      last_form_ = req.body;
      ++token_calls_;
      res.set_content(nlohmann::json{{"access_token", "at"},
                                     {"refresh_token", "rt-next"},
                                     {"id_token", id_token_},
                                     {"token_type", "Bearer"},
                                     {"expires_in", 300}}
                          .dump(),
                      "application/json");
    });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeProvider() {
    server_.stop();
    thread_.join();
  }
  void Publish(std::initializer_list<const TestKey*> keys) {
    std::lock_guard<std::mutex> lock(mu_);
    jwks_ = testing::JwksOf(keys);
  }
  void Answer(const std::string& id_token) {
    std::lock_guard<std::mutex> lock(mu_);
    id_token_ = id_token;
  }
  void LieAboutIssuer(const std::string& issuer) {
    std::lock_guard<std::mutex> lock(mu_);
    discovery_issuer_ = issuer;
  }
  void TokenEndpoint(const std::string& url) {
    std::lock_guard<std::mutex> lock(mu_);
    token_endpoint_ = url;
  }
  int token_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return token_calls_;
  }
  int jwks_fetches() {
    std::lock_guard<std::mutex> lock(mu_);
    return jwks_fetches_;
  }
  std::string last_form() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_form_;
  }
  const std::string& issuer() const { return issuer_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::string issuer_;
  std::mutex mu_;
  std::string jwks_ = R"({"keys": []})";
  std::string id_token_;
  std::string discovery_issuer_;
  std::string token_endpoint_;
  std::string last_form_;
  int jwks_fetches_ = 0;
  int token_calls_ = 0;
};

}  // namespace gantry::testing
