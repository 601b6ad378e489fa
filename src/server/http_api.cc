// Routes of the REST API.
#include "server/http_api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "billing/report.h"
#include "core/clock.h"
#include "core/encoding.h"
#include "core/job_arrays.h"
#include "core/job_changes.h"
#include "core/job_logs.h"
#include "core/log_window.h"
#include "core/spec_yaml.h"
#include "core/yaml_util.h"
#include "server/agent_hub.h"
#include "server/audit_routes.h"
#include "server/http_reply.h"
#include "server/identity_service.h"
#include "server/port_proxy.h"
#include "server/web_assets.h"

namespace gantry {

namespace {

// An audit row's outcome ("created", "ok", or a CodeName) as the HTTP status it was answered with.
int HttpStatusOfOutcome(const std::string& outcome) {
  if (outcome == "created") return 201;
  // The autoscaler's hook calls: started, then ok, failed (its cloud's error) or no capacity.
  if (outcome == "started") return 202;
  if (outcome == "failed") return 502;
  if (outcome == "no_capacity") return 503;
  for (auto code :
       {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied,
        StatusCode::kNotFound, StatusCode::kAlreadyExists, StatusCode::kFailedPrecondition, StatusCode::kTooLarge,
        StatusCode::kKeyReused, StatusCode::kOverLimit, StatusCode::kUnavailable}) {
    if (outcome == CodeName(code)) return HttpStatus(code);
  }
  return 500;
}

// Whether the request asks for a dry run (?dry_run=true or 1).
bool DryRunAsked(const httplib::Request& req) {
  std::string v = req.get_param_value("dry_run");
  return v == "true" || v == "1";
}

// {"jobs": [spec, ...]} as JSON or YAML: each spec parsed on its own (a bad one is
// reported for its index, the others still parsed for a dry run).
Expected<std::vector<Expected<JobSpec>>> ParseBatch(const std::string& body) {
  if (body.empty()) return Status::Invalid("body", "the request body is empty");
  auto loaded = LoadYaml(body, "body", "malformed YAML/JSON");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  if (!root.IsMap() || !root["jobs"] || !root["jobs"].IsSequence() || root.size() != 1) {
    return Status::Invalid("jobs", "expected {jobs: [job, ...]}");
  }
  if (root["jobs"].size() == 0 || root["jobs"].size() > static_cast<size_t>(kMaxArrayTasks)) {
    return Status::Invalid("jobs", fmt::format("a batch holds 1..{} jobs", kMaxArrayTasks));  // a dry run's too
  }
  std::vector<Expected<JobSpec>> specs;
  for (const YAML::Node& job : root["jobs"]) specs.push_back(ParseJobSpec(job));
  return specs;
}

// `limit` (1..10000; absent: all) and `offset` of a paged list.
bool ReadPage(const httplib::Request& req, httplib::Response& res, PageQuery* page) {
  int64_t limit = 0, offset = 0;
  if (!IntParam(req, res, "limit", 1, 10000, &limit) || !IntParam(req, res, "offset", 0, INT32_MAX, &offset)) {
    return false;
  }
  page->limit = static_cast<int>(limit);
  page->offset = static_cast<int>(offset);
  return true;
}

// A long poll: answered here when orders are queued (or the wait is 0), else later by the
// front end (HttpFront::Defer), with no thread held while it waits.
void PollAgentOrders(AgentHub& hub, const Actor& who, const httplib::Request& req, uint64_t ack, int wait,
                     httplib::Response& res) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool handler_done = false;
    std::optional<Answer> now;
    HttpFront::Answer later;
  };
  auto state = std::make_shared<State>();
  hub.Poll(who, req.get_param_value("node"), req.get_param_value("session"), ack, wait, [state](Answer r) {
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->handler_done || !state->later) {
      state->now = std::move(r);
      state->cv.notify_all();
      return;
    }
    HttpFront::Answer later = std::move(state->later);
    lock.unlock();
    int status = r ? 200 : HttpStatus(r.status().code());
    nlohmann::json body = r ? *r : ErrorJson(r.status());
    later(status, "application/json", body.dump(-1, ' ', false, kReplaceBadUtf8));
  });
  std::unique_lock<std::mutex> lock(state->mu);
  state->handler_done = true;
  if (!state->now) state->later = HttpFront::Defer();
  if (!state->later) state->cv.wait(lock, [&] { return state->now.has_value(); });  // not on the front: wait here
  if (state->now) Reply(res, *state->now);
}

}  // namespace

HttpApi::HttpApi(Controller& controller, const UserDirectory& users, HttpOptions options)
    : controller_(controller),
      users_(users),
      options_(std::move(options)),
      server_(std::make_unique<HttpFront>(options_.limits, options_.tls)) {
  server_->set_tcp_nodelay(true);  // answers are small: do not wait for Nagle
  server_->SetGate([this](const httplib::Request& req, httplib::Response& res) { return Gate(req, res); });
  // The event loop waits for a body only where a handler reads one: an API call with a valid
  // token (Gate refuses the others at once; no page or probe outside /v1/ takes a body).
  server_->SetBodyGate([this](std::string_view path, std::string_view authorization) {
    if (options_.identity && IsOpenAuthPath(path)) return true;  // small bodies: Gate
    if (path.rfind("/v1/", 0) != 0 || authorization.rfind("Bearer ", 0) != 0) return false;
    std::string_view token = authorization.substr(7);
    if (users_.Authenticate(std::string(token), WallClock().NowMs())) return true;
    if (options_.identity && (IdentityService::IsSessionToken(std::string(token)) ||
                              options_.identity->MayBeProviderToken(std::string(token)))) {
      return true;  // checked by Gate
    }
    return path.rfind("/v1/agent/", 0) == 0 && options_.agent_token_plausible && options_.agent_token_plausible(token);
  });
  server_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (HttpFront::BodyOverLimit()) {
      res.status = 413;
      res.set_header("Connection", "close");
      std::optional<Actor> who = Caller(req, false);
      controller_.RecordAudit(who ? *who : Actor{"-", "", Role::kUser}, req.method + " " + req.path, "",
                              "payload_too_large", "chunked body over the limit");
    }
    if (HttpFront::BadFraming()) {
      res.status = 400;
      return ReplyError(res, 400, "invalid_argument",
                        "a body is framed by Content-Length or Transfer-Encoding: chunked, not both or another",
                        "Transfer-Encoding");
    }
    if (!res.body.empty() && res.status != 413) return;
    if (res.status == 413) {
      ReplyError(res, 413, "payload_too_large", "the request body is larger than the server accepts", "body");
    } else if (res.status == 404) {
      ReplyError(res, 404, "not_found", "no such endpoint");
    } else {
      ReplyError(res, res.status, "error", fmt::format("HTTP {}", res.status));
    }
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ReplyError(res, 500, "internal", what);
  });
  Routes();
  AuthRoutes();
  StreamRoutes();
}

namespace {
thread_local std::string t_token_refusal;  // why the last external token was refused (for the 401)
thread_local bool t_token_unchecked;       // it could not be checked now: 503, try again
}  // namespace

std::optional<Actor> PersonByToken(const UserDirectory& users, IdentityService* identity, const std::string& token,
                                   const std::string& team, const std::string& remote_addr, std::string* why) {
  if (const Actor* known = users.Authenticate(token, WallClock().NowMs())) {
    if (known->role == Role::kAgent || known->role == Role::kLoginNode) return std::nullopt;
    return *known;
  }
  if (identity && (IdentityService::IsSessionToken(token) || identity->MayBeProviderToken(token))) {
    std::string refusal;
    auto person = identity->Authenticate(token, team, remote_addr, &refusal);
    if (!person && why) *why = refusal;
    return person;
  }
  return std::nullopt;
}

std::optional<Actor> HttpApi::Caller(const httplib::Request& req, bool may_ask) const {
  t_token_refusal.clear();
  t_token_unchecked = false;
  std::string header = req.get_header_value("Authorization");
  if (header.rfind("Bearer ", 0) != 0) return std::nullopt;
  std::string token = header.substr(7);
  if (const Actor* known = users_.Authenticate(token, WallClock().NowMs())) return *known;
  if (options_.identity && (IdentityService::IsSessionToken(token) || options_.identity->MayBeProviderToken(token))) {
    return PersonByToken(users_, options_.identity, token, req.get_header_value("X-Gantry-Team"), req.remote_addr,
                         &t_token_refusal);
  }
  // Another kind of agent token, for the agents' endpoints only.
  if (!may_ask || req.path.rfind("/v1/agent/", 0) != 0 || !options_.verify_agent_token ||
      !options_.agent_token_plausible || !options_.agent_token_plausible(token)) {
    return std::nullopt;
  }
  auto agent = options_.verify_agent_token(token, req.remote_addr);
  if (!agent) {
    t_token_refusal = agent.status().message();
    t_token_unchecked = agent.status().code() == StatusCode::kUnavailable;
    return std::nullopt;
  }
  return *agent;
}

void HttpApi::Unauthenticated(const httplib::Request& req, httplib::Response& res) {
  bool mutating = req.method != "GET" && req.method != "HEAD";
  if (mutating)
    controller_.RecordAudit({"-", "", Role::kUser}, req.method + " " + req.path, "", "unauthenticated", "refused");
  res.set_header("WWW-Authenticate", "Bearer");
  if (t_token_unchecked) {  // not refused: the token could not be checked now
    res.set_header("Retry-After", "1");
    return ReplyError(res, 503, "unavailable", t_token_refusal, "Authorization");
  }
  std::string why = !req.has_header("Authorization") ? "an Authorization: Bearer token is required"
                    : t_token_refusal.empty()        ? "the token is not valid"
                                                     : "the token is not valid: " + t_token_refusal;
  ReplyError(res, 401, "unauthenticated", why, "Authorization");
}

bool HttpApi::Gate(const httplib::Request& req, httplib::Response& res) {
  // Every path the API serves is text; bytes that are not UTF-8 (after percent-decoding)
  // name nothing, and would go into audit rows.
  if (InvalidUtf8At(req.path) >= 0) {
    ReplyError(res, 400, "invalid_argument", "the path (percent-decoded) is not UTF-8 text", "path");
    return true;
  }
  std::string length = req.get_header_value("Content-Length");
  uint64_t n = 0;
  std::from_chars(length.data(), length.data() + length.size(), n);
  if (n > options_.limits.max_body_bytes) {
    std::optional<Actor> who = Caller(req, false);
    controller_.RecordAudit(who ? *who : Actor{"-", "", Role::kUser}, req.method + " " + req.path, "",
                            "payload_too_large", fmt::format("body of {} bytes", n));
    ReplyError(res, 413, "payload_too_large",
               fmt::format("the request body ({} bytes) is larger than the server accepts ({} bytes)", n,
                           options_.limits.max_body_bytes),
               "body");
    return true;
  }
  // A body is read only for a caller with a valid token, or a small one for sign-in.
  bool body = n > 0 || req.has_header("Transfer-Encoding");
  if (options_.identity && IsOpenAuthPath(req.path)) {
    if (!body || (n > 0 && n <= kOpenAuthBodyBytes)) return false;
    ReplyError(res, 413, "payload_too_large",
               fmt::format("a sign-in request's body is at most {} bytes, with Content-Length", kOpenAuthBodyBytes),
               "body");
    return true;
  }
  if (body && req.path.rfind("/v1/", 0) == 0 && !Caller(req)) {
    Unauthenticated(req, res);
    return true;
  }
  return false;
}

HttpApi::~HttpApi() { Shutdown(); }

Expected<int> HttpApi::Bind(const std::string& host, int port) {
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Status::Invalid("listen", fmt::format("cannot listen on {}:{}", host, port));
  server_->SetBacklog(4096);
  return bound;
}

void HttpApi::Serve() {
  server_->listen_after_bind();
  serve_returned_ = true;
}

void HttpApi::Shutdown() {
  if (!server_) return;
  for (int i = 0; i < 5000 && !server_->is_running() && !serve_returned_; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  server_->Shutdown();
}

bool HttpApi::IdempotencyKey(const Actor& who, const httplib::Request& req, httplib::Response& res,
                             const std::string& action, std::string* key) {
  *key = req.get_header_value("Idempotency-Key");
  const bool control = std::any_of(key->begin(), key->end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  const char* wrong = key->size() > 255          ? "longer than 255 characters"
                      : InvalidUtf8At(*key) >= 0 ? "not UTF-8 text"
                      : control                  ? "has control characters"
                                                 : nullptr;
  if (!wrong) return true;
  controller_.RecordAudit(who, action, "", "invalid_argument", std::string("Idempotency-Key ") + wrong);
  ReplyError(res, 400, "invalid_argument", wrong, "Idempotency-Key");
  return false;
}

std::function<void(const httplib::Request&, httplib::Response&)> HttpApi::Authed(Handler fn) {
  return [this, fn](const httplib::Request& req, httplib::Response& res) {
    std::optional<Actor> who = Caller(req);
    if (who && (who->role == Role::kAgent) != (req.path.rfind("/v1/agent/", 0) == 0)) {
      std::string why =
          who->role == Role::kAgent ? "an agent token may use /v1/agent/* only" : "only node agents use /v1/agent/*";
      controller_.RecordAudit(*who, req.method + " " + req.path, "", "forbidden", why);
      ReplyError(res, 403, "forbidden", why, "Authorization");
      return;
    }
    if (who && (who->role == Role::kLoginNode) != (req.path == "/v1/auth/login-node")) {
      std::string why = who->role == Role::kLoginNode ? "a login node's token may use /v1/auth/login-node only"
                                                      : "only login nodes use /v1/auth/login-node";
      controller_.RecordAudit(*who, req.method + " " + req.path, "", "forbidden", why);
      ReplyError(res, 403, "forbidden", why, "Authorization");
      return;
    }
    if (!who) return Unauthenticated(req, res);
    if (req.body.size() > options_.limits.max_body_bytes) {  // a chunked body: its size is known now
      controller_.RecordAudit(*who, req.method + " " + req.path, "", "payload_too_large",
                              fmt::format("body of {} bytes", req.body.size()));
      return ReplyError(res, 413, "payload_too_large", "the request body is larger than the server accepts", "body");
    }
    fn(*who, req, res);
  };
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;
  auto authed = [this](Handler fn) { return Authed(std::move(fn)); };

  // The dashboard: its page at /, its files under /ui/, compiled in. Loading them needs no
  // token; every number the page shows comes from the API with the signed-in user's token.
  auto serve_asset = [](const std::string& path, httplib::Response& res) {
    const WebAsset* asset = FindWebAsset(path);
    if (!asset) return ReplyError(res, 404, "not_found", "no such page", "path");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                   "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(asset->data, asset->size, asset->content_type);
  };
  s.Get("/", [serve_asset](const httplib::Request&, httplib::Response& res) { serve_asset("/", res); });
  s.Get(R"(/ui(/.+))",
        [serve_asset](const httplib::Request& req, httplib::Response& res) { serve_asset(req.matches[1], res); });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  // For orchestrators: alive and ready (a standby answers both too, with "standby": on
  // Kubernetes the Service's Endpoints, which the leader writes, keep its traffic away).
  s.Get("/readyz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"leader"})", "application/json");
  });
  s.Get("/livez", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"leader"})", "application/json");
  });
  // The metrics cover every team's jobs and costs: open, else an admin's, or a reader's whom
  // the cluster allows (on Kubernetes, for a token that is not Gantry's).
  s.Get("/metrics", [this, authed](const httplib::Request& req, httplib::Response& res) {
    auto serve = [this](httplib::Response& r) { r.set_content(controller_.Metrics(), "text/plain; version=0.0.4"); };
    if (options_.open_metrics) return serve(res);
    const std::string header = req.get_header_value("Authorization");
    const std::string token = header.rfind("Bearer ", 0) == 0 ? header.substr(7) : "";
    if (options_.verify_metrics_reader && !token.empty() && !users_.Authenticate(token, WallClock().NowMs())) {
      auto reader = options_.verify_metrics_reader(token, req.remote_addr);
      if (reader) return serve(res);
      const StatusCode code = reader.status().code();
      res.set_header("WWW-Authenticate", "Bearer");
      if (code == StatusCode::kUnavailable) res.set_header("Retry-After", "1");
      if (code == StatusCode::kPermissionDenied) {  // the cluster knows them: audited
        controller_.RecordAudit({"-", "", Role::kUser}, "GET /metrics", "", "forbidden", reader.status().message());
      }
      return Reply(res, Status(code, reader.status().message(), "Authorization"));
    }
    authed([this, serve](const Actor& who, const httplib::Request&, httplib::Response& r) {
      if (who.admin()) return serve(r);
      controller_.RecordAudit(who, "GET /metrics", "", "forbidden", "not an admin");
      ReplyError(r, 403, "forbidden", "/metrics covers every team: it needs an admin token", "Authorization");
    })(req, res);
  });
  s.Get("/v1/whoami", authed([](const Actor& who, const httplib::Request&, httplib::Response& res) {
          // `teams`: the teams a signed-in person may act for (X-Gantry-Team), theirs first.
          nlohmann::json teams = {who.team};
          for (const std::string& t : who.other_teams) teams.push_back(t);
          Send(res, 200, {{"user", who.user}, {"team", who.team}, {"role", ToString(who.role)}, {"teams", teams}});
        }));

  s.Post("/v1/jobs", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           if (!OnlyParams(req, res, {"dry_run"})) return;
           if (req.body.empty()) return ReplyError(res, 400, "invalid_argument", "the request body is empty", "body");
           auto spec = ParseJobSpecText(req.body);
           if (DryRunAsked(req)) {
             std::vector<Expected<JobSpec>> one;
             one.push_back(std::move(spec));
             return Reply(res, controller_.DryRun(who, std::move(one)));
           }
           if (!spec) {
             controller_.RecordAudit(who, AuditRoute(StateAction::kSubmit, ""), "", "invalid_argument",
                                     spec.status().ToString());
             return Reply(res, spec.status());
           }
           std::string key;
           if (!IdempotencyKey(who, req, res, AuditRoute(StateAction::kSubmit, ""), &key)) return;
           auto submitted = controller_.Submit(who, std::move(*spec), key);
           if (!submitted) return Reply(res, submitted.status());
           Send(res, submitted->created ? 201 : 200, submitted->job);
         }));
  s.Post("/v1/jobs/batch", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           if (!OnlyParams(req, res, {"dry_run"})) return;
           auto specs = ParseBatch(req.body);
           if (!specs) {
             controller_.RecordAudit(who, AuditRoute(StateAction::kSubmitBatch, ""), "", "invalid_argument",
                                     specs.status().ToString());
             return Reply(res, specs.status());
           }
           if (DryRunAsked(req)) return Reply(res, controller_.DryRun(who, std::move(*specs)));
           std::vector<JobSpec> jobs;
           for (size_t i = 0; i < specs->size(); ++i) {
             Expected<JobSpec>& spec = (*specs)[i];
             if (!spec) {
               Status s = spec.status();
               Status named(s.code(), fmt::format("job {} of the batch: {}", i + 1, s.message()),
                            fmt::format("jobs[{}]{}", i, s.field().empty() ? "" : "." + s.field()));
               controller_.RecordAudit(who, AuditRoute(StateAction::kSubmitBatch, ""), "", "invalid_argument",
                                       named.ToString());
               return Reply(res, named);
             }
             jobs.push_back(std::move(*spec));
           }
           std::string key;
           if (!IdempotencyKey(who, req, res, AuditRoute(StateAction::kSubmitBatch, ""), &key)) return;
           auto submitted = controller_.SubmitBatch(who, std::move(jobs), key);
           if (!submitted) return Reply(res, submitted.status());
           Send(res, submitted->created ? 201 : 200, submitted->job);
         }));
  s.Get("/v1/jobs", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"state", "team", "user", "name", "limit", "offset", "q", "since", "until"}))
            return;
          JobFilter f;
          f.state = req.get_param_value("state");
          f.names = req.get_param_value("name");
          if (f.names.size() > 2000) return ReplyError(res, 400, "invalid_argument", "at most 2000 characters", "name");
          f.team = req.get_param_value("team");
          f.user = req.get_param_value("user");
          for (auto [name, at] : {std::pair{"since", &f.since_ms}, {"until", &f.until_ms}}) {
            if (req.has_param(name) && !ParseUtc(req.get_param_value(name), at)) {
              return ReplyError(res, 400, "invalid_argument", "must be a UTC time: 2026-11-26T14:00:00Z", name);
            }
          }
          int64_t limit = 500, offset = 0;
          if (!IntParam(req, res, "limit", 1, 10000, &limit) || !IntParam(req, res, "offset", 0, INT32_MAX, &offset)) {
            return;
          }
          f.limit = static_cast<int>(limit);
          f.offset = static_cast<int>(offset);
          f.search = req.get_param_value("q");
          if (f.search.size() > 200) return ReplyError(res, 400, "invalid_argument", "at most 200 characters", "q");
          Reply(res, controller_.ListJobs(who, f));
        }));
  s.Get(R"(/v1/jobs/([^/]+))", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          auto job = controller_.GetJob(who, req.matches[1]);
          if (job && options_.ports && job->contains("ports")) {  // each named port's address through the server
            for (nlohmann::json& port : (*job)["ports"]) {
              if (port.value("name", "") != "master") {
                port["proxy_url"] = options_.ports->AddressOf(job->value("id", ""), port.value("name", ""));
              }
            }
          }
          Reply(res, job);
        }));
  s.Delete(R"(/v1/jobs/([^/]+))", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             if (!OnlyParams(req, res, {})) return;
             Reply(res, controller_.Cancel(who, req.matches[1]));
           }));
  s.Post(R"(/v1/jobs/([^/]+)/checkpoint-done)",
         authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           if (!OnlyParams(req, res, {})) return;
           Reply(res, controller_.CheckpointDone(who, req.matches[1]));
         }));
  for (const char* verb : {"hold", "release"}) {
    s.Post(fmt::format(R"(/v1/jobs/([^/]+)/{})", verb),
           authed([this, hold = std::string(verb) == "hold"](const Actor& who, const httplib::Request& req,
                                                             httplib::Response& res) {
             if (!OnlyParams(req, res, {})) return;
             Reply(res, hold ? controller_.Hold(who, req.matches[1]) : controller_.Release(who, req.matches[1]));
           }));
  }
  s.Patch(R"(/v1/jobs/([^/]+))", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
            if (!OnlyParams(req, res, {})) return;
            auto changes = ParseJobChangesText(req.body);
            if (!changes) {  // audited as the state audits its own refusals of a change
              controller_.RecordAudit(who, AuditRoute(StateAction::kUpdate, req.matches[1]), req.matches[1],
                                      CodeName(changes.status().code()), changes.status().message());
              return Reply(res, changes.status());
            }
            Reply(res, controller_.Update(who, req.matches[1], *changes));
          }));
  s.Get(R"(/v1/jobs/([^/]+)/events)",
        authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          Reply(res, controller_.Events(who, req.matches[1]));
        }));
  s.Get(R"(/v1/jobs/([^/]+)/logs)",
        authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"stream", "offset", "rank", "run"})) return;
          std::string id = req.matches[1];
          Answer job = controller_.GetJob(who, id);  // 404 for other teams' jobs
          if (!job) return Reply(res, job);
          ServeJobLog(*job, req, res);
        }));
  s.Get("/v1/queue", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"team", "limit", "offset"})) return;
          PageQuery page;
          if (!ReadPage(req, res, &page)) return;
          page.team = req.get_param_value("team");
          Reply(res, controller_.Queue(who, page));
        }));
  s.Get("/v1/cluster", authed([this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Cluster());
        }));
  s.Get("/v1/nodes", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"limit", "offset", "telemetry"})) return;
          PageQuery page;
          if (!ReadPage(req, res, &page)) return;
          std::string telemetry = req.get_param_value("telemetry");
          if (!telemetry.empty() && telemetry != "true" && telemetry != "false") {
            return ReplyError(res, 400, "invalid_argument", "must be true or false", "telemetry");
          }
          page.telemetry = telemetry == "true";
          Reply(res, controller_.Nodes(who, page));
        }));
  s.Get("/v1/pools", authed([this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Pools());
        }));
  s.Get("/v1/teams", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Teams(who));
        }));
  s.Get("/v1/history", authed([this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"range"})) return;
          Reply(res, controller_.History(req.get_param_value("range")));
        }));
  for (bool drain : {true, false}) {
    s.Post(drain ? R"(/v1/nodes/([^/]+)/drain)" : R"(/v1/nodes/([^/]+)/undrain)",
           authed([this, drain](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             if (!OnlyParams(req, res, {"gpu"})) return;
             int64_t gpu = -1;
             if (!IntParam(req, res, "gpu", 0, 63, &gpu)) return;
             Reply(res, controller_.SetDrain(who, req.matches[1], static_cast<int>(gpu), drain));
           }));
  }
  s.Get(R"(/v1/nodes/([^/]+)/gpus)",
        authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.NodeGpus(who, req.matches[1]));
        }));
  s.Get(R"(/v1/nodes/([^/]+)/events)",
        authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"limit"})) return;
          int64_t limit = 100;
          if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
          Reply(res, controller_.NodeHistory(who, req.matches[1], static_cast<int>(limit)));
        }));
  s.Post(R"(/v1/nodes/([^/]+)/gpus/(\d+)/fault)",
         authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           std::string target = std::string(req.matches[1]) + ":" + std::string(req.matches[2]);
           std::string action = "POST /v1/nodes/" + std::string(req.matches[1]) + "/gpus/fault";
           if (!who.admin()) {
             controller_.RecordAudit(who, action, target, "forbidden", "refused");
             return ReplyError(res, 403, "forbidden", "only admins inject faults");
           }
           if (!options_.inject_fault) return ReplyError(res, 404, "not_found", "this server runs no fake GPUs");
           nlohmann::json fault = nlohmann::json::parse(req.body, nullptr, false);
           if (!fault.is_object()) return ReplyError(res, 400, "invalid_argument", "expected a JSON object", "body");
           std::string index = req.matches[2];
           int gpu = -1;
           auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), gpu);
           if (ec != std::errc() || end != index.data() + index.size() || gpu > 63) {
             return ReplyError(res, 400, "invalid_argument", "must be a GPU index within 0..63", "gpu");
           }
           Status s = options_.inject_fault(req.matches[1], gpu, fault);
           controller_.RecordAudit(who, action, target, CodeName(s.code()),
                                   fault.dump(-1, ' ', false, kReplaceBadUtf8));
           if (!s.ok()) return Reply(res, s);
           Send(res, 200, {{"injected", fault}});
         }));
  if (options_.agents) {
    AgentHub* hub = options_.agents;
    auto body_json = [](const httplib::Request& req, httplib::Response& res, nlohmann::json* out) {
      *out = nlohmann::json::parse(req.body, nullptr, false);
      if (out->is_object()) return true;
      ReplyError(res, 400, "invalid_argument", "expected a JSON object", "body");
      return false;
    };
    s.Post("/v1/agent/register",
           authed([hub, body_json](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             nlohmann::json body;
             if (body_json(req, res, &body)) Reply(res, hub->Register(who, body));
           }));
    s.Get("/v1/agent/orders",
          authed([this, hub](const Actor& who, const httplib::Request& req, httplib::Response& res) {
            if (!OnlyParams(req, res, {"node", "session", "ack", "wait"})) return;
            int64_t wait = 0, ack = 0;
            if (!IntParam(req, res, "wait", 0, options_.max_poll_s, &wait)) return;
            if (!IntParam(req, res, "ack", 0, INT64_MAX, &ack)) return;
            PollAgentOrders(*hub, who, req, static_cast<uint64_t>(ack), static_cast<int>(wait), res);
          }));
    s.Post("/v1/agent/report",
           authed([hub, body_json](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             nlohmann::json body;
             if (body_json(req, res, &body)) Reply(res, hub->Report(who, body));
           }));
  }
  s.Get("/v1/usage", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"from", "to", "team", "by"})) return;
          UsageQuery q;
          const Calendar& cal = controller_.calendar();
          TimeMs now = controller_.CurrentTime();
          q.from = cal.MonthStart(now);
          for (auto [name, out] : {std::pair{"from", &q.from}, {"to", &q.to}}) {
            if (!req.has_param(name)) continue;
            auto t = cal.ParseDate(req.get_param_value(name), name);
            if (!t) return Reply(res, t.status());
            *out = *t;
          }
          q.team = req.get_param_value("team");
          if (req.has_param("by")) q.by = req.get_param_value("by");
          Reply(res, controller_.Usage(who, q));
        }));
  s.Get("/v1/reports/monthly", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"month", "format"})) return;
          std::string month = req.has_param("month") ? req.get_param_value("month")
                                                     : controller_.calendar().MonthOf(controller_.CurrentTime());
          std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
          if (format != "json" && format != "csv" && format != "html") {
            return ReplyError(res, 400, "invalid_argument", "must be json, csv or html", "format");
          }
          Answer r = controller_.MonthlyReport(who, month);
          if (!r || format == "json") return Reply(res, r);
          if (format == "csv") {
            res.set_header("Content-Disposition", "attachment; filename=\"gantry-" + month + ".csv\"");
            return res.set_content(ReportCsv(*r), "text/csv");
          }
          res.set_content(ReportHtml(*r), "text/html; charset=utf-8");
        }));
  s.Get("/v1/budgets", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Budgets(who));
        }));
  s.Get("/v1/alerts", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Alerts(who));
        }));
  s.Get("/v1/audit", authed([this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"limit"})) return;
          int64_t limit = 100;
          if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
          Answer audit = controller_.AuditLog(who, static_cast<int>(limit));
          if (audit) {
            for (auto& row : (*audit)["audit"]) row["status"] = HttpStatusOfOutcome(row.value("outcome", ""));
          }
          Reply(res, audit);
        }));
}

}  // namespace gantry
