// Jobs' named ports served through the server (Jupyter, TensorBoard, any HTTP or WebSocket
// server a job runs) at PORTS_URL/jobs/ID/ports/NAME/, on a listener of its own: a job's
// pages run the job owner's scripts, so they never share an origin with the dashboard (whose
// tokens they could otherwise read). Each request is checked (the caller may open sessions
// in the job, which runs, and has a port of that name) and goes to the job's node as a port
// connection (StreamHub): the agent connects to the port on its loopback.
//
// Who calls: a bearer token (curl, scripts), or a browser's cookie. The dashboard gets a
// ticket for one job's port (POST /v1/jobs/ID/ports/NAME/ticket, 60 s, once) and opens the
// port's address with it; the proxy turns it into an HttpOnly cookie for that port's path
// alone, holding the caller's token sealed (so a revoked or expired token ends it too).
// A browser that comes without one is sent to the dashboard's page of the job to get one.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "identity/sealed_box.h"
#include "server/controller.h"
#include "server/http_front.h"
#include "server/stream_hub.h"
#include "state/auth.h"

namespace gantry {

// Who a bearer token is (and, for a signed-in person, which team it acts for): the API's
// own check, or nothing.
using TokenCheck = std::function<std::optional<Actor>(const std::string& token, const std::string& team,
                                                      const std::string& remote_addr)>;

struct PortProxyOptions {
  FrontLimits limits;
  std::shared_ptr<TlsContext> tls;
};

class PortProxy {
 public:
  PortProxy(Controller& controller, StreamHub& hub, TokenCheck check, PortProxyOptions options);
  ~PortProxy();

  // Listens on host:port (0: any free port); the port bound.
  Expected<int> Bind(const std::string& host, int port);
  // Where browsers reach the proxy and the dashboard (no trailing slash); set before Serve.
  void SetUrls(std::string ports_url, std::string dashboard_url);
  const std::string& url() const { return ports_url_; }
  void Serve();  // until Shutdown
  void Shutdown();

  // The address of job `id`'s port `name` (the job's own id, as its port's path prefix).
  std::string AddressOf(const std::string& job_id, const std::string& name) const;
  // A ticket for `who` (holding `token`, acting for `team`) to open job `id`'s port `name`
  // in a browser: {"url", "expires_in"}; refused as a session in the job would be. Audited.
  Expected<nlohmann::json> IssueTicket(const Actor& who, const std::string& token, const std::string& team,
                                       const std::string& id, const std::string& name);

 private:
  void Handle(const httplib::Request& req, httplib::Response& res);
  // A browser's ticket for this port: a cookie for its path, and the same address without it.
  void Redeem(const httplib::Request& req, httplib::Response& res, const std::string& id, const std::string& name,
              const std::string& prefix);
  // The caller, by bearer token or by this port's cookie; nothing when neither is valid.
  std::optional<Actor> Caller(const httplib::Request& req, const std::string& id, const std::string& name);
  // The page a browser gets when it cannot be let in: why, and a link to the dashboard.
  void RefuseBrowser(httplib::Response& res, int status, const std::string& why, const std::string& id);
  // Marks a ticket's nonce used; false when it was already.
  bool FirstUse(const std::string& nonce, int64_t expires_ms);

  Controller& controller_;
  StreamHub& hub_;
  TokenCheck check_;
  PortProxyOptions options_;
  std::unique_ptr<HttpFront> front_;
  SealedBox box_;
  std::string ports_url_;
  std::string dashboard_url_;
  std::atomic<bool> serve_returned_{false};
  bool shut_ = false;
  std::mutex used_mu_;
  std::map<std::string, int64_t> used_tickets_;  // nonce -> expiry (ms), while it could be used
};

}  // namespace gantry
