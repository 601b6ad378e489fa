// The CLI's connection to a server: address and token from flags, the environment
// (GANTRY_SERVER, GANTRY_TOKEN, GANTRY_TOKEN_FILE, GANTRY_CA_CERT, GANTRY_SERVER_WAIT,
// GANTRY_TEAM) or ~/.config/gantry/config.yaml, else a session (client/session_file.h), and
// JSON requests that turn server errors into messages naming the field. With several
// servers (a leader and standbys on one PostgreSQL store), requests follow the leader and
// wait out a take-over.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/byte_stream.h"
#include "core/encoding.h"
#include "core/status.h"
#include "net/http_exchange.h"

namespace gantry {
class LeaderFollower;
}

namespace gantry {

struct ClientConfig {
  std::string server;  // http://host:port, or several, comma-separated: the one that leads is used
  std::string token;
  std::string token_file;
  std::string profiles;  // job profiles YAML
  std::string ca_cert;   // PEM CA for an https:// server (GANTRY_CA_CERT); else the system's CAs
  // The team a signed-in member of several acts for (GANTRY_TEAM, config.yaml `team`): sent
  // as X-Gantry-Team; empty: the session's default team.
  std::string team;
  bool no_session = false;          // resolve without the saved session (gantry login, logout)
  bool token_from_session = false;  // the token is the saved session's (forgotten on a 401)
  // GANTRY_SERVER_WAIT / server_wait: seconds a request waits for a leader, a lone address
  // included (one Kubernetes Service or virtual IP in front of a leader and its standby).
  // -1: ApiClient::kFailoverWaitS with several addresses, none for a lone one.
  int server_wait_s = -1;
};

// Fills what the flags left empty from the environment, the config file and defaults
// (http://127.0.0.1:8080; the standalone admin token file when readable).
Status ResolveClientConfig(ClientConfig& c);

// Whether any of the configured servers is https:// (the lean `gantry` hands such calls to
// gantryd, which has TLS).
bool WantsTls(const ClientConfig& c);

// The transport for https:// servers. http:// ones always take the plain transport; https
// needs one set here (gantryd sets cpp-httplib's); without it an https request fails
// saying so.
using TlsConnector =
    std::function<std::unique_ptr<HttpConnection>(const std::string& url, const HttpConnectionOptions& options)>;
void SetTlsConnector(TlsConnector connector);

struct HttpAnswer {
  int status = 0;
  nlohmann::json body;  // JSON answers
  std::string text;     // the raw body
  std::map<std::string, std::string> headers;
};

class ApiClient {
 public:
  // How long a request waits for a leader while servers stand by or do not answer (only
  // with several servers, or once a standby answered): a take-over's bound and more.
  static constexpr int kFailoverWaitS = 30;
  static constexpr int kMaxServerWaitS = 3600;

  explicit ApiClient(const ClientConfig& config);
  ~ApiClient();

  Expected<HttpAnswer> Get(const std::string& path);
  Expected<HttpAnswer> Post(const std::string& path, const std::string& body, const std::string& content_type,
                            const std::map<std::string, std::string>& headers = {});
  Expected<HttpAnswer> Patch(const std::string& path, const std::string& body, const std::string& content_type);
  Expected<HttpAnswer> Delete(const std::string& path);
  // An upgraded connection (GET `path`, Upgrade: gantry-stream) to the leader: an
  // interactive session's stream, or the server's refusal as an error naming the field.
  Expected<std::unique_ptr<ByteStream>> OpenStream(const std::string& path);

 private:
  Expected<HttpAnswer> Send(HttpRequest request, bool resend);

  std::unique_ptr<LeaderFollower> servers_;
  std::string server_;  // as the user gave it, for messages
  std::string token_;
  std::string team_;
  int wait_s_ = kFailoverWaitS;
  bool lone_waits_ = false;  // a lone address is asked again until wait_s_ has passed
  std::string bad_server_;   // why --server could not be read, reported on the first request
  std::string ca_cert_;
};

// "error (400): gpus: must be >= 1" from an error answer.
std::string DescribeError(const HttpAnswer& a);

}  // namespace gantry
