// The Kubernetes API client: cpp-httplib over OpenSSL, nlohmann::json for the objects.
#include "kube/kube_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/stat.h>

#include <cstdlib>

#include "core/read_file.h"

namespace gantry {

namespace {

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

std::string Trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

KubeResponse ResponseOf(const httplib::Response& r) {
  KubeResponse out;
  out.status = r.status;
  out.body = nlohmann::json::parse(r.body, nullptr, false);
  if (out.body.is_discarded()) out.body = {{"message", r.body.substr(0, 200)}};
  return out;
}

}  // namespace

Expected<KubeConfig> KubeConfig::InCluster(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return Status::Precondition("kube", "not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and _PORT are not set");
  }
  std::string dir = secrets_dir.empty() ? kServiceAccountDir : secrets_dir;
  KubeConfig c;
  std::string h = host;
  c.url = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
  c.ca_file = dir + "/ca.crt";
  c.token_file = dir + "/token";
  for (const std::string& f : {c.ca_file, c.token_file}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return Status::Precondition("kube", f + " is missing (no service account token?)");
  }
  c.ns = Trimmed(ReadFileNoThrow(dir + "/namespace", 256).value_or(""));
  return c;
}

std::string KubeResponse::Error() const {
  std::string message = StringAt(body, "message");
  return fmt::format("HTTP {}{}{}", status, message.empty() ? "" : ": ", message);
}

KubeClient::KubeClient(KubeConfig config)
    : config_(std::move(config)),
      token_file_(config_.token_file.empty() ? nullptr : std::make_unique<TokenFile>(config_.token_file)) {}

KubeClient::~KubeClient() { Stop(); }

std::unique_ptr<httplib::Client> KubeClient::Connect(int read_timeout_s) const {
  auto cli = std::make_unique<httplib::Client>(config_.url);
  cli->set_connection_timeout(config_.timeout_s, 0);
  cli->set_read_timeout(read_timeout_s, 0);
  cli->set_write_timeout(config_.timeout_s, 0);
  if (!config_.ca_file.empty()) cli->set_ca_cert_path(config_.ca_file.c_str());
  cli->enable_server_certificate_verification(true);
  return cli;
}

Expected<KubeResponse> KubeClient::Call(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type) {
  std::unique_lock<std::mutex> kept_lock(call_mu_, std::defer_lock);
  std::unique_ptr<httplib::Client> own;
  httplib::Client* cli = nullptr;
  if (config_.keep_alive) {
    kept_lock.lock();
    if (!kept_) {
      kept_ = Connect(config_.timeout_s);
      kept_->set_keep_alive(true);
    }
    cli = kept_.get();
  } else {
    own = Connect(config_.timeout_s);
    cli = own.get();
  }
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (std::string token = token_file_ ? token_file_->Current() : ""; !token.empty())
    headers.emplace("Authorization", "Bearer " + token);
  httplib::Result r = method == "GET"     ? cli->Get(path.c_str(), headers)
                      : method == "POST"  ? cli->Post(path.c_str(), headers, body, content_type.c_str())
                      : method == "PATCH" ? cli->Patch(path.c_str(), headers, body, content_type.c_str())
                      : body.empty()      ? cli->Delete(path.c_str(), headers)
                                          : cli->Delete(path.c_str(), headers, body, content_type.c_str());
  if (!r) {
    return Status(StatusCode::kUnavailable, fmt::format("the Kubernetes API at {} did not answer {} {}: {}",
                                                        config_.url, method, path, httplib::to_string(r.error())));
  }
  return ResponseOf(*r);
}

Expected<KubeResponse> KubeClient::Get(const std::string& path) { return Call("GET", path, "", ""); }

Expected<KubeResponse> KubeClient::Post(const std::string& path, const nlohmann::json& body) {
  return Call("POST", path, body.dump(), "application/json");
}

Expected<KubeResponse> KubeClient::Patch(const std::string& path, const nlohmann::json& body,
                                         const std::string& content_type) {
  return Call("PATCH", path, body.dump(), content_type);
}

Expected<KubeResponse> KubeClient::Delete(const std::string& path, const nlohmann::json& options) {
  return Call("DELETE", path, options.is_null() ? "" : options.dump(), "application/json");
}

Expected<KubeResponse> KubeClient::Watch(const std::string& path, int read_timeout_s,
                                         const std::function<bool(const nlohmann::json&)>& on_event) {
  auto cli = Connect(read_timeout_s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return Status(StatusCode::kUnavailable, "the client is stopping");
    watching_ = cli.get();
  }
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (std::string token = token_file_ ? token_file_->Current() : ""; !token.empty())
    headers.emplace("Authorization", "Bearer " + token);
  std::string line, refusal;
  int status = 0;
  bool ended_by_caller = false;
  auto r = cli->Get(
      path.c_str(), headers,
      [&](const httplib::Response& head) {
        status = head.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (stopped_) return false;  // Stop came before the socket was there to shut
        if (status != 200) {         // a refusal's Status object, whole
          refusal.append(data, n);
          return refusal.size() < (1 << 20);
        }
        line.append(data, n);
        for (size_t nl; (nl = line.find('\n')) != std::string::npos;) {
          std::string one = line.substr(0, nl);
          line.erase(0, nl + 1);
          if (one.empty()) continue;
          nlohmann::json event = nlohmann::json::parse(one, nullptr, false);
          if (event.is_discarded() || !event.is_object()) continue;
          if (!on_event(event)) {
            ended_by_caller = true;
            return false;
          }
        }
        return line.size() < (16 << 20);  // one event is never this large
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    watching_ = nullptr;
  }
  if (status != 0 && status != 200) {
    httplib::Response head;
    head.status = status;
    head.body = refusal;
    return ResponseOf(head);
  }
  if (!r && !ended_by_caller && !stopped_ && r.error() != httplib::Error::Canceled) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("the watch of {} at {} broke: {}", path, config_.url, httplib::to_string(r.error())));
  }
  return KubeResponse{200, nlohmann::json::object()};
}

void KubeClient::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  if (watching_) watching_->stop();
}

}  // namespace gantry
