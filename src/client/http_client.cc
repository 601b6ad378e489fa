// The CLI's HTTP client.
#include "client/http_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "client/session_file.h"
#include "core/config_dir.h"
#include "core/local_listener.h"
#include "core/yaml_util.h"
#include "net/leader_follower.h"
#include "net/plain_http_connection.h"
#include "net/stream_upgrade.h"

namespace gantry {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// "~/tok" as a shell would read it.
std::string ExpandHome(const std::string& path) {
  if (path == "~" || path.rfind("~/", 0) == 0) return Env("HOME") + path.substr(1);
  return path;
}

// The token in a file the user named: a file that cannot be read, or holds no token, is
// an error (not a silent 401 later).
Expected<std::string> TokenFromFile(const std::string& path, const std::string& named_by) {
  std::ifstream in(path);
  if (!in)
    return Status::Invalid(named_by, fmt::format("cannot read the token file {}: {}", path, std::strerror(errno)));
  std::string token = FirstLine(path);
  if (token.empty()) return Status::Invalid(named_by, fmt::format("the token file {} is empty", path));
  return token;
}

// The standalone server's admin token, when no other was given: from an absolute path only
// (with HOME unset the default data directory is relative, and a token planted in the
// caller's directory must not be sent), and only to one loopback address where a server
// of the token file's owner listens (not to another host, nor to whatever another local
// user bound to 127.0.0.1:8080 while the server was down).
std::string StandaloneAdminToken(const std::vector<std::string>& servers) {
  const std::string path = DefaultDataDir() + "/admin.token";
  struct stat file;
  if (path.front() != '/' || servers.size() != 1 || ::stat(path.c_str(), &file) != 0) return "";
  auto address = SplitServerAddress(servers[0]);
  if (!address || !LoopbackListenerOwnedBy(address->host, address->port, file.st_uid)) return "";
  return FirstLine(path);
}

TlsConnector& Tls() {
  static TlsConnector connector;
  return connector;
}

// GANTRY_SERVER_WAIT's or server_wait's seconds; `field` names where it came from.
Expected<int> ServerWaitSeconds(const std::string& text, const std::string& field) {
  int seconds = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || seconds < 0 ||
      seconds > ApiClient::kMaxServerWaitS)
    return Status::Invalid(field, fmt::format("'{}': whole seconds from 0 to {}", text, ApiClient::kMaxServerWaitS));
  return seconds;
}

}  // namespace

Status ResolveClientConfig(ClientConfig& c) {
  std::string home = Env("HOME");
  std::string config_home = Env("XDG_CONFIG_HOME").empty() ? home + "/.config" : Env("XDG_CONFIG_HOME");
  std::string file = config_home + "/gantry/config.yaml";
  ClientConfig from_file;
  std::string server_wait;
  if (std::ifstream(file).good()) {
    auto text = ReadTextFile(file);
    try {
      YamlReader r(YAML::Load(*text), file);
      from_file.server = r.Optional<std::string>("server", "");
      from_file.token = r.Optional<std::string>("token", "");
      from_file.token_file = r.Optional<std::string>("token_file", "");
      from_file.profiles = r.Optional<std::string>("profiles", "");
      from_file.ca_cert = r.Optional<std::string>("ca_cert", "");
      from_file.team = r.Optional<std::string>("team", "");
      server_wait = r.Optional<std::string>("server_wait", "");
      if (Status s = r.Finish(); !s.ok()) return s;
    } catch (const YAML::Exception& e) {
      return Status::Invalid(file, e.what());
    }
  }
  auto pick = [](std::string& v, std::initializer_list<std::string> options) {
    for (const std::string& o : options) {
      if (v.empty()) v = o;
    }
  };
  pick(c.server, {Env("GANTRY_SERVER"), from_file.server});
  if (c.server.empty() && !c.no_session) c.server = ImpliedServer();  // gantry login's, or the login node's
  pick(c.server, {"http://127.0.0.1:8080"});
  std::string token_file_source = !c.token_file.empty()               ? "--token-file"
                                  : !Env("GANTRY_TOKEN_FILE").empty() ? "GANTRY_TOKEN_FILE"
                                                                      : file + ": token_file";
  pick(c.token_file, {Env("GANTRY_TOKEN_FILE"), from_file.token_file});
  c.token_file = ExpandHome(c.token_file);
  std::string from_token_file;
  if (c.token.empty() && Env("GANTRY_TOKEN").empty() && !c.token_file.empty()) {
    auto token = TokenFromFile(c.token_file, token_file_source);
    if (!token) return token.status();
    from_token_file = *token;
  }
  pick(c.token, {Env("GANTRY_TOKEN"), from_token_file, from_file.token});
  auto servers = ParseServerList(c.server, "server");
  if (!servers) return servers.status();
  pick(c.profiles, {Env("GANTRY_PROFILES"), from_file.profiles, config_home + "/gantry/profiles.yaml"});
  pick(c.ca_cert, {Env("GANTRY_CA_CERT"), from_file.ca_cert});
  c.profiles = ExpandHome(c.profiles);
  c.ca_cert = ExpandHome(c.ca_cert);
  c.server = fmt::format("{}", fmt::join(*servers, ","));
  if (c.server_wait_s < 0 && (!Env("GANTRY_SERVER_WAIT").empty() || !server_wait.empty())) {
    const bool from_env = !Env("GANTRY_SERVER_WAIT").empty();
    auto seconds = ServerWaitSeconds(from_env ? Env("GANTRY_SERVER_WAIT") : server_wait,
                                     from_env ? "GANTRY_SERVER_WAIT" : file + ": server_wait");
    if (!seconds) return seconds.status();
    c.server_wait_s = *seconds;
  }
  pick(c.team, {Env("GANTRY_TEAM"), from_file.team});
  // No token given: this server's session (gantry login), or the login node's service, or
  // on this machine the standalone server's admin token.
  if (c.token.empty() && !c.no_session) {
    auto session = SessionToken(c);
    if (!session) return session.status();
    c.token = *session;
    c.token_from_session = !c.token.empty();
  }
  if (c.token.empty()) c.token = StandaloneAdminToken(*servers);
  return Status::Ok();
}

bool WantsTls(const ClientConfig& c) {
  auto urls = ParseServerList(c.server, "server");
  return urls &&
         std::any_of(urls->begin(), urls->end(), [](const std::string& u) { return u.rfind("https://", 0) == 0; });
}

void SetTlsConnector(TlsConnector connector) { Tls() = std::move(connector); }

ApiClient::ApiClient(const ClientConfig& config)
    : server_(config.server),
      token_(config.token),
      team_(config.team),
      wait_s_(config.server_wait_s < 0 ? kFailoverWaitS : config.server_wait_s),
      lone_waits_(config.server_wait_s > 0) {
  auto urls = ParseServerList(config.server, "server");
  if (!urls) bad_server_ = urls.status().ToString();
  HttpConnectionOptions options;
  options.ca_cert = ca_cert_ = config.ca_cert;
  servers_ = std::make_unique<LeaderFollower>(
      urls ? *urls : std::vector<std::string>{}, [options](const std::string& url) -> std::unique_ptr<HttpConnection> {
        if (url.rfind("https://", 0) != 0) return ConnectPlainHttp(url, options);
        if (Tls()) return Tls()(url, options);
        return FailingConnection("this program has no TLS for https:// servers: run the command with gantryd");
      });
}

ApiClient::~ApiClient() = default;

namespace {

Expected<HttpAnswer> ToAnswer(HttpResponse r, const std::string& server) {
  if (!r) {
    const bool several = server.find(',') != std::string::npos;
    return Status::Invalid("server",
                           fmt::format("cannot reach {}{}: {}{} (is `gantry server` running? set --server "
                                       "or GANTRY_SERVER)",
                                       several ? "any of " : "", server, DescribeFailure(r),
                                       MayHaveArrived(r.failure) ? "; the request may have been applied" : ""));
  }
  HttpAnswer a;
  a.status = r.status;
  for (const auto& [k, v] : r.headers) a.headers.emplace(k, v);
  if (r.Header("Content-Type").find("json") != std::string::npos) a.body = ParseAnswerJson(r.body);
  a.text = std::move(r.body);
  return a;
}

}  // namespace

Expected<HttpAnswer> ApiClient::Send(HttpRequest request, bool resend) {
  if (!bad_server_.empty()) return Status::Invalid("server", bad_server_);
  if (!token_.empty()) request.headers.emplace("Authorization", "Bearer " + token_);
  if (!team_.empty()) request.headers.emplace("X-Gantry-Team", team_);
  return ToAnswer(servers_->Send(request, resend, std::chrono::seconds(wait_s_), lone_waits_), server_);
}

// Reads are sent again after a broken connection; a write only under an Idempotency-Key,
// which makes the server apply it once however often it arrives.
Expected<HttpAnswer> ApiClient::Get(const std::string& path) { return Send({"GET", path, {}, "", ""}, true); }

Expected<HttpAnswer> ApiClient::Post(const std::string& path, const std::string& body, const std::string& content_type,
                                     const std::map<std::string, std::string>& headers) {
  return Send({"POST", path, HttpHeaders(headers.begin(), headers.end()), body, content_type},
              headers.count("Idempotency-Key") > 0);
}

Expected<HttpAnswer> ApiClient::Patch(const std::string& path, const std::string& body,
                                      const std::string& content_type) {
  return Send({"PATCH", path, {}, body, content_type}, false);
}

Expected<HttpAnswer> ApiClient::Delete(const std::string& path) { return Send({"DELETE", path, {}, "", ""}, false); }

Expected<std::unique_ptr<ByteStream>> ApiClient::OpenStream(const std::string& path) {
  if (!bad_server_.empty()) return Status::Invalid("server", bad_server_);
  HttpRequest request{"GET", path, {}, "", ""};
  if (!token_.empty()) request.headers.emplace("Authorization", "Bearer " + token_);
  if (!team_.empty()) request.headers.emplace("X-Gantry-Team", team_);
  HttpConnectionOptions options;
  options.ca_cert = ca_cert_;
  options.read_timeout = std::chrono::seconds(60);  // the agent has 20 s to connect back
  // The leader first (the last one that answered); a standby's 503 sends it to the next.
  std::vector<std::string> urls = servers_->urls();
  std::rotate(urls.begin(), std::find(urls.begin(), urls.end(), servers_->current()), urls.end());
  Status last = Status::Invalid("server", "no server to ask");
  for (const std::string& url : urls) {
    UpgradeRefusal refusal;
    auto stream = OpenUpgradedStream(url, request, options, &refusal);
    if (stream) return stream;
    last = stream.status();
    if (refusal.status != 0 && refusal.status != 503) return last;
  }
  return last;
}

std::string DescribeError(const HttpAnswer& a) {
  if (a.body.is_object() && a.body.contains("error")) {
    const auto& e = a.body["error"];
    std::string field = e.value("field", "");
    return fmt::format("error ({}): {}{}", a.status, field.empty() ? "" : field + ": ", e.value("message", ""));
  }
  return fmt::format("error ({}): {}", a.status, a.text);
}

}  // namespace gantry
