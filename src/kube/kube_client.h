// A client of the Kubernetes API server: HTTPS verified against the cluster's CA, a bearer
// token read again from its file when it changes (the kubelet rotates projected tokens),
// JSON in and out, and watches streamed one event per line.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/encoding.h"
#include "core/json_fields.h"
#include "core/status.h"
#include "core/token_file.h"

namespace httplib {
class Client;
}

namespace gantry {

struct KubeConfig {
  std::string url;         // https://host:port
  std::string ca_file;     // the cluster's CA bundle (PEM)
  std::string token_file;  // a bearer token, read when it changes
  std::string ns;          // the namespace this process runs in (in-cluster), else empty
  int timeout_s = 10;      // connect, read and write timeout of a call (a watch reads longer)
  // One connection kept open and reused (the calls of one client then go one at a time):
  // for a client that makes many calls in a row, such as the binder's.
  bool keep_alive = false;

  // The pod's own configuration: KUBERNETES_SERVICE_HOST and _PORT, and the service
  // account's token, CA and namespace under /var/run/secrets/kubernetes.io/serviceaccount
  // (or `secrets_dir`). The error says what is missing.
  static Expected<KubeConfig> InCluster(const std::string& secrets_dir = "");
};

// An answer of the API server: its HTTP status and body (JSON; a Status object on errors).
struct KubeResponse {
  int status = 0;
  nlohmann::json body;
  bool ok() const { return status >= 200 && status < 300; }
  // The API server's own words for a refusal (its Status message), with the HTTP status.
  std::string Error() const;
};

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const KubeConfig& config() const { return config_; }
  // One call; a transport failure (no connection, TLS, a timeout) is an error Status, an
  // HTTP answer of any status is a KubeResponse.
  Expected<KubeResponse> Get(const std::string& path);
  Expected<KubeResponse> Post(const std::string& path, const nlohmann::json& body);
  Expected<KubeResponse> Patch(const std::string& path, const nlohmann::json& body,
                               const std::string& content_type = "application/merge-patch+json");
  Expected<KubeResponse> Delete(const std::string& path, const nlohmann::json& options = nullptr);

  // Streams `path` (a ?watch=1 URL): `on_event` gets each event object as it comes, and
  // ends the watch by returning false. Returns when the server ends the stream (its
  // timeoutSeconds), on a transport error, or when Stop is called. A refusal (say 410
  // Gone on an expired resourceVersion) comes back as a KubeResponse with its status.
  Expected<KubeResponse> Watch(const std::string& path, int read_timeout_s,
                               const std::function<bool(const nlohmann::json&)>& on_event);
  // Ends a watch in progress (from any thread) and refuses later ones.
  void Stop();

 private:
  Expected<KubeResponse> Call(const std::string& method, const std::string& path, const std::string& body,
                              const std::string& content_type);
  std::unique_ptr<httplib::Client> Connect(int read_timeout_s) const;

  KubeConfig config_;
  std::atomic<bool> stopped_{false};
  std::unique_ptr<TokenFile> token_file_;
  std::mutex mu_;  // guards the watch's client
  httplib::Client* watching_ = nullptr;
  std::mutex call_mu_;  // with keep_alive: guards the one connection
  std::unique_ptr<httplib::Client> kept_;
};

}  // namespace gantry
