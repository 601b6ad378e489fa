// The REST API (/v1/...), /healthz and /metrics on cpp-httplib: authentication, request
// parsing and error answers here; every state read or change goes through the Controller.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/controller.h"
#include "server/http_front.h"
#include "server/http_reply.h"
#include "state/auth.h"

namespace gantry {

class AgentHub;
class StreamHub;
class IdentityService;
class PortProxy;

// A person by bearer token: users.yaml's, or a signed-in session's (acting for `team` where
// they may); nothing for another token (`why`, when given, says why a session's was refused).
std::optional<Actor> PersonByToken(const UserDirectory& users, IdentityService* identity, const std::string& token,
                                   const std::string& team, const std::string& remote_addr, std::string* why = nullptr);

struct HttpOptions {
  FrontLimits limits;               // connections, timeouts, body size, workers
  std::shared_ptr<TlsContext> tls;  // null: plain HTTP
  bool open_metrics = true;         // /metrics without a token
  // The directories that may hold a job's logs (job_logs.h), searched in order (standalone:
  // the in-process agent's, then what remote agents shipped); empty: the server keeps none.
  std::function<std::vector<std::string>(const std::string& job_id)> job_log_dirs;
  // Fake GPUs only: inject a fault ({"xid": 79}, {"temperature_c": 95}, {"ecc_uncorrected": 2},
  // {"heal": true}) into GPU `gpu` of a node. Empty: the endpoint answers 404.
  std::function<Status(const std::string& node, int gpu, const nlohmann::json& fault)> inject_fault;
  AgentHub* agents = nullptr;    // remote agents (/v1/agent/*); null: none
  StreamHub* streams = nullptr;  // interactive sessions (exec, attach); null: none
  PortProxy* ports = nullptr;    // jobs' ports through the server (tickets, addresses); null: none
  // Node agents' bearer tokens that users.yaml does not hold, checked elsewhere (a pod's
  // Kubernetes service-account token: kube/agent_identity.h). `plausible` says, without
  // I/O (on the event loop), whether a token may be one, so its body is read; `verify`
  // gives the agent it speaks for or why not (on a worker; it may ask the API server).
  std::function<bool(std::string_view token)> agent_token_plausible;
  std::function<Expected<Actor>(const std::string& token, const std::string& client_address)> verify_agent_token;
  // With --metrics-need-token, who besides admins may read /metrics: a bearer token that
  // users.yaml does not hold, checked elsewhere (a Kubernetes service account that RBAC lets
  // get /metrics: kube/metrics_reader.h). The reader's name, or why not (kUnavailable: ask
  // again); empty: admins only.
  std::function<Expected<std::string>(const std::string& token, const std::string& client_address)>
      verify_metrics_reader;
  int max_poll_s = 25;  // longest long poll an agent may ask for
  // People's sign-in (identity.yaml): session tokens, /auth/* and /v1/auth/*; null: static
  // tokens only.
  IdentityService* identity = nullptr;
  std::string public_url;   // where browsers reach this server (the sign-in's redirect URI)
  bool tls_served = false;  // served over HTTPS: cookies are Secure
};

// The sign-in endpoints that take a body from a caller without a token yet (a device code,
// a refresh token), kept to kOpenAuthBodyBytes.
bool IsOpenAuthPath(std::string_view path);
constexpr size_t kOpenAuthBodyBytes = 4096;

class HttpApi {
 public:
  HttpApi(Controller& controller, const UserDirectory& users, HttpOptions options);
  ~HttpApi();

  // Binds host:port (port 0: any free port); returns the bound port or an error.
  Expected<int> Bind(const std::string& host, int port);
  void Serve();  // blocks until Shutdown
  // Stops Serve, also when called just before Serve got going (a SIGTERM right after the
  // ready file): the listener's stop acts only on a running server, so this waits for it.
  void Shutdown();

 private:
  void Routes();
  // Sign-in (http_auth.cc): /v1/auth/*, the dashboard's /auth/login and /auth/callback, and
  // /v1/tokens.
  void AuthRoutes();
  // Interactive sessions (http_streams.cc): /v1/jobs/ID/exec and /attach, /v1/agent/streams/ID.
  void StreamRoutes();
  // A handler that authenticates (401 without a valid bearer token), keeps each kind of
  // token to its endpoints, and runs `fn` with the caller.
  using Handler = std::function<void(const Actor&, const httplib::Request&, httplib::Response&)>;
  std::function<void(const httplib::Request&, httplib::Response&)> Authed(Handler fn);
  // GET /v1/jobs/ID/logs for a job the caller may see: one run's (default: the latest) rank's
  // (default: 0) stream from an offset, with X-Log-Offset, X-Log-Run, X-Log-Ranks,
  // X-Job-State and, where the cap cut what was asked for, X-Log-Cut.
  void ServeJobLog(const nlohmann::json& job, const httplib::Request& req, httplib::Response& res);
  // The request's Idempotency-Key (empty when none); false after answering 400 (audited)
  // for one longer than 255 characters.
  bool IdempotencyKey(const Actor& who, const httplib::Request& req, httplib::Response& res, const std::string& action,
                      std::string* key);
  // The caller of a request, or null without a valid bearer token.
  // The caller by its bearer token (users.yaml's, or an agent's verified elsewhere, which
  // may take a call to the Kubernetes API: not when `may_ask` is false, for an audit line).
  std::optional<Actor> Caller(const httplib::Request& req, bool may_ask = true) const;
  // Answers 401 (audited when the call would change something).
  void Unauthenticated(const httplib::Request& req, httplib::Response& res);
  // Before a body is read: its size, and its sender's token when there is a body.
  bool Gate(const httplib::Request& req, httplib::Response& res);

  Controller& controller_;
  const UserDirectory& users_;
  HttpOptions options_;
  std::unique_ptr<HttpFront> server_;
  std::atomic<bool> serve_returned_{false};
};

}  // namespace gantry
