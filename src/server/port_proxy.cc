// The port proxy's listener: its one route (/jobs/ID/ports/NAME/...), tickets and cookies,
// and each request's exchange with the job's port through the StreamHub.
#include "server/port_proxy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "core/clock.h"
#include "core/encoding.h"
#include "core/html_util.h"
#include "server/http_reply.h"
#include "server/port_proxy_http.h"

namespace gantry {

namespace {

constexpr int64_t kTicketMs = 60 * 1000;         // a ticket opens the port within a minute, once
constexpr int64_t kCookieMs = 12 * 3600 * 1000;  // then the browser's cookie, for a working day
constexpr size_t kMaxAnswerHead = 64 * 1024;     // the job's answer head
constexpr int kAnswerWaitMs = 120 * 1000;        // for the job to start answering
constexpr int kWriteTimeoutMs = 30000;
constexpr char kCookie[] = "gantry_port";
constexpr char kTicketPurpose[] = "port-ticket";
constexpr char kCookiePurpose[] = "port-cookie";

// A browser's navigation (it shows the page we answer), not a script's or a tool's call.
bool FromBrowserNavigation(const httplib::Request& req) {
  return (req.method == "GET" || req.method == "HEAD") &&
         req.get_header_value("Accept").find("text/html") != std::string::npos;
}

// The request's target without the ticket parameter (the address the browser goes on to):
// its path as sent, its other parameters encoded again.
std::string WithoutTicket(const httplib::Request& req) {
  std::string query;
  for (const auto& [name, value] : req.params) {
    if (name == "gantry_ticket") continue;
    query += (query.empty() ? "?" : "&") + UrlEncode(name) + "=" + UrlEncode(value);
  }
  return req.target.substr(0, req.target.find('?')) + query;
}

// Job ids ("12", an array task's "7_2") and port names (lower-case identifiers): anything
// else names no port, and never reaches a header.
bool PlainWord(const std::string& s) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

// A port connection's first exchange: the rewritten request to the job's port, and its
// answer's head (1xx heads before it passed on as they come) to the browser.
PortRelay Exchange(const std::string& request, const std::string& prefix, bool upgrade, ByteStream& client,
                   ByteStream& agent) {
  auto bad_gateway = [&client](const std::string& why) {
    client.WriteAll(RenderResponse(502, "text/plain; charset=utf-8", "gantry: " + why + "\n", true), kWriteTimeoutMs);
    return PortRelay::kEnd;
  };
  if (!agent.WriteAll(request, kWriteTimeoutMs)) return bad_gateway("the job's node did not take the request");
  for (;;) {
    std::string head, rest;
    if (!ReadHttpHead(agent, kMaxAnswerHead, kAnswerWaitMs, &head, &rest)) {
      return bad_gateway("the job's port gave no answer (nothing, or a head over 64 KiB, within 120 s)");
    }
    std::optional<BrowserAnswer> answer = BrowserAnswerHead(head, upgrade, prefix);
    if (!answer) return bad_gateway("the job's port answered something that is not HTTP/1.1");
    if (!client.WriteAll(answer->head, kWriteTimeoutMs)) return PortRelay::kEnd;
    if (answer->status >= 200 || answer->status == 101) {
      if (!rest.empty() && !client.WriteAll(rest, kWriteTimeoutMs)) return PortRelay::kEnd;
      return answer->status == 101 ? PortRelay::kBothWays : PortRelay::kAnswerOnly;
    }
    agent.Unread(std::move(rest));  // an informational answer (103): the real one follows
  }
}

}  // namespace

PortProxy::PortProxy(Controller& controller, StreamHub& hub, TokenCheck check, PortProxyOptions options)
    : controller_(controller),
      hub_(hub),
      check_(std::move(check)),
      options_(std::move(options)),
      front_(std::make_unique<HttpFront>(options_.limits, options_.tls)) {
  front_->set_tcp_nodelay(true);
  auto handle = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
  const char* route = R"(/jobs/([^/]+)/ports/([^/]+)(/.*)?)";
  front_->Get(route, handle);
  front_->Post(route, handle);
  front_->Put(route, handle);
  front_->Patch(route, handle);
  front_->Delete(route, handle);
  front_->Options(route, handle);
  front_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "Gantry's port proxy: open a job's port from its page on the dashboard, or as "
        "PORTS_URL/jobs/ID/ports/NAME/ with a bearer token.\n",
        "text/plain; charset=utf-8");
  });
  front_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string why = res.status == 404   ? "no such address: a job's port is at /jobs/ID/ports/NAME/"
                      : res.status == 413 ? "the request body is larger than the port proxy takes"
                                          : fmt::format("HTTP {}", res.status);
    res.set_content("gantry: " + why + "\n", "text/plain; charset=utf-8");
  });
}

PortProxy::~PortProxy() { Shutdown(); }

Expected<int> PortProxy::Bind(const std::string& host, int port) {
  int bound = port == 0 ? front_->bind_to_any_port(host) : (front_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Status::Invalid("--ports-listen", fmt::format("cannot listen on {}:{}", host, port));
  front_->SetBacklog(1024);
  return bound;
}

void PortProxy::SetUrls(std::string ports_url, std::string dashboard_url) {
  ports_url_ = std::move(ports_url);
  dashboard_url_ = std::move(dashboard_url);
}

void PortProxy::Serve() {
  front_->listen_after_bind();
  serve_returned_ = true;
}

void PortProxy::Shutdown() {
  if (!front_ || shut_) return;
  shut_ = true;
  for (int i = 0; i < 5000 && !front_->is_running() && !serve_returned_; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  front_->Shutdown();
}

std::string PortProxy::AddressOf(const std::string& job_id, const std::string& name) const {
  return fmt::format("{}/jobs/{}/ports/{}/", ports_url_, job_id, name);
}

Expected<nlohmann::json> PortProxy::IssueTicket(const Actor& who, const std::string& token, const std::string& team,
                                                const std::string& id, const std::string& name) {
  auto target = controller_.FindStreamTarget(who, id, StreamKind::kPort, 0, name, "port ticket");
  if (!target) return target.status();
  const int64_t expires = WallClock().NowMs() + kTicketMs;
  nlohmann::json sealed = {{"t", token}, {"team", team}, {"j", target->job_id},
                           {"p", name},  {"e", expires}, {"n", NewToken()}};
  std::string url = AddressOf(target->job_id, name) + "?gantry_ticket=" + box_.Seal(sealed.dump(), kTicketPurpose);
  controller_.RecordAudit(who, "port ticket", target->shown_id, "ok",
                          fmt::format("port {} on node {}", name, target->node_id));
  return nlohmann::json{{"url", url}, {"expires_in", kTicketMs / 1000}};
}

bool PortProxy::FirstUse(const std::string& nonce, int64_t expires_ms) {
  std::lock_guard<std::mutex> lock(used_mu_);
  const int64_t now = WallClock().NowMs();
  for (auto it = used_tickets_.begin(); it != used_tickets_.end();) {
    it = it->second < now ? used_tickets_.erase(it) : std::next(it);
  }
  return used_tickets_.emplace(nonce, expires_ms).second;
}

void PortProxy::RefuseBrowser(httplib::Response& res, int status, const std::string& why, const std::string& id) {
  std::string job_page = fmt::format("{}/#/jobs/{}", dashboard_url_, UrlEncode(id));
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(fmt::format("<!doctype html><meta charset=utf-8><title>Gantry</title><p>{}</p><p>Open the port "
                              "again from <a href=\"{}\">the job's page</a>.</p>\n",
                              HtmlEscape(why), HtmlEscape(job_page)),
                  "text/html; charset=utf-8");
}

void PortProxy::Redeem(const httplib::Request& req, httplib::Response& res, const std::string& id,
                       const std::string& name, const std::string& prefix) {
  const std::string expired = "This link to the job's port has expired or was used already.";
  std::optional<std::string> plain = box_.Open(req.get_param_value("gantry_ticket"), kTicketPurpose);
  nlohmann::json t = plain ? nlohmann::json::parse(*plain, nullptr, false) : nlohmann::json();
  if (!t.is_object() || t.value("j", "") != id || t.value("p", "") != name ||
      t.value("e", int64_t{0}) < WallClock().NowMs() || !FirstUse(t.value("n", ""), t.value("e", int64_t{0}))) {
    return RefuseBrowser(res, 401, expired, id);
  }
  std::optional<Actor> who = check_(t.value("t", ""), t.value("team", ""), req.remote_addr);
  if (!who) return RefuseBrowser(res, 401, "The token this link was made with is no longer valid.", id);
  nlohmann::json cookie = {
      {"t", t["t"]}, {"team", t["team"]}, {"j", id}, {"p", name}, {"e", WallClock().NowMs() + kCookieMs}};
  const bool secure = options_.tls || ports_url_.rfind("https://", 0) == 0;
  res.set_header("Set-Cookie", fmt::format("{}={}; Path={}; Max-Age={}; HttpOnly; SameSite=Lax{}", kCookie,
                                           box_.Seal(cookie.dump(), kCookiePurpose), prefix, kCookieMs / 1000,
                                           secure ? "; Secure" : ""));
  res.set_header("Cache-Control", "no-store");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_redirect(WithoutTicket(req), 303);
}

std::optional<Actor> PortProxy::Caller(const httplib::Request& req, const std::string& id, const std::string& name) {
  std::string header = req.get_header_value("Authorization");
  if (header.rfind("Bearer ", 0) == 0) {
    return check_(header.substr(7), req.get_header_value("X-Gantry-Team"), req.remote_addr);
  }
  // A hostile page may have set cookies of this name too: only one we sealed, for this
  // job's port, counts.
  for (const std::string& value : CookieValues(req, kCookie)) {
    std::optional<std::string> plain = box_.Open(value, kCookiePurpose);
    nlohmann::json c = plain ? nlohmann::json::parse(*plain, nullptr, false) : nlohmann::json();
    if (!c.is_object() || c.value("j", "") != id || c.value("p", "") != name ||
        c.value("e", int64_t{0}) < WallClock().NowMs()) {
      continue;
    }
    if (auto who = check_(c.value("t", ""), c.value("team", ""), req.remote_addr)) return who;
  }
  return std::nullopt;
}

void PortProxy::Handle(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  const std::string name = req.matches[2];
  if (!PlainWord(id) || !PlainWord(name)) {
    return ReplyError(res, 404, "not_found", "no such job's port: the address is /jobs/ID/ports/NAME/", "path");
  }
  const std::string prefix = fmt::format("/jobs/{}/ports/{}/", id, name);
  if (!req.matches[3].matched) {  // relative links of the job's pages need the slash
    std::string query = req.target.find('?') != std::string::npos ? req.target.substr(req.target.find('?')) : "";
    return res.set_redirect(prefix + query, 308);
  }
  if (req.has_param("gantry_ticket")) return Redeem(req, res, id, name, prefix);
  std::optional<Actor> who = Caller(req, id, name);
  if (!who) {
    if (FromBrowserNavigation(req) && !req.has_header("Authorization")) {
      // Signed in on the dashboard, the browser gets a ticket there and comes back.
      res.set_header("Cache-Control", "no-store");
      return res.set_redirect(fmt::format("{}/#/jobs/{}?port={}", dashboard_url_, UrlEncode(id), UrlEncode(name)), 303);
    }
    res.set_header("WWW-Authenticate", "Bearer");
    return ReplyError(res, 401, "unauthenticated",
                      "a job's port needs an Authorization: Bearer token, or opening from the dashboard",
                      "Authorization");
  }
  if (who->role == Role::kAgent || who->role == Role::kLoginNode) {
    return ReplyError(res, 403, "forbidden", "a node agent's or login node's token opens no job's port",
                      "Authorization");
  }
  auto target = controller_.FindStreamTarget(*who, id, StreamKind::kPort, 0, name, "port");
  if (!target) {
    if (FromBrowserNavigation(req)) {
      return RefuseBrowser(res, target.status().code() == StatusCode::kNotFound ? 404 : 409, target.status().message(),
                           id);
    }
    return Reply(res, target.status());
  }
  std::string why;
  if (!hub_.Admit(*who, &why, true)) return ReplyError(res, 429, "over_limit", why, "id");
  const bool upgrade = AsksUpgrade(req);
  StreamOrder order;
  order.kind = StreamKind::kPort;
  order.port = target->port;
  std::string request = UpstreamRequest(req, prefix.substr(0, prefix.size() - 1), upgrade, options_.tls != nullptr);
  bool taken = HttpFront::TakeOver([this, who = *who, target = *target, order, request = std::move(request), prefix,
                                    upgrade](std::unique_ptr<ByteStream> c) {
    hub_.Start(who, target, order, std::move(c), [request, prefix, upgrade](ByteStream& client, ByteStream& agent) {
      return Exchange(request, prefix, upgrade, client, agent);
    });
  });
  if (!taken) {
    hub_.Release(*who, true);
    ReplyError(res, 500, "internal", "the connection could not be taken over");
  }
}

}  // namespace gantry
