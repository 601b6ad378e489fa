// Routes of the REST API.
#include "server/http_api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>
#include <fstream>
#include <set>

#include "core/spec_yaml.h"
#include "server/agent_hub.h"

namespace gantry {

namespace {

void Reply(httplib::Response& res, const ApiResult& r) {
  res.status = r.status;
  res.set_content(r.body.dump(-1, ' ', false, kReplaceBadUtf8), "application/json");
}

void ReplyError(httplib::Response& res, int status, const std::string& code, const std::string& message,
                const std::string& field = "") {
  Reply(res, ApiResult::Error(status, code, message, field));
}

// Refuses query parameters the route does not know, naming the first one.
bool OnlyParams(const httplib::Request& req, httplib::Response& res, std::initializer_list<const char*> known) {
  std::set<std::string> ok(known.begin(), known.end());
  for (const auto& [k, v] : req.params) {
    if (!ok.count(k)) {
      ReplyError(res, 400, "invalid_argument", "unknown query parameter", k);
      return false;
    }
  }
  return true;
}

bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t lo, int64_t hi,
              int64_t* out) {
  if (!req.has_param(name)) return true;
  std::string v = req.get_param_value(name);
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) {
    ReplyError(res, 400, "invalid_argument", fmt::format("must be an integer within {}..{}", lo, hi), name);
    return false;
  }
  *out = x;
  return true;
}

}  // namespace

HttpApi::HttpApi(Controller& controller, const UserDirectory& users, HttpOptions options)
    : controller_(controller),
      users_(users),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()) {
  int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_keep_alive_max_count(100000);
  server_->set_keep_alive_timeout(30);
  server_->set_tcp_nodelay(true);  // answers are small: do not wait for Nagle
  server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
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
}

HttpApi::~HttpApi() { Shutdown(); }

Expected<int> HttpApi::Bind(const std::string& host, int port) {
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Status::Invalid("listen", fmt::format("cannot listen on {}:{}", host, port));
  return bound;
}

void HttpApi::Serve() { server_->listen_after_bind(); }

void HttpApi::Shutdown() {
  if (server_) server_->stop();
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;
  // Authenticates (401 without a valid bearer token) and runs `fn` with the caller.
  using Handler = std::function<void(const Actor&, const httplib::Request&, httplib::Response&)>;
  auto authed = [this](bool mutating, Handler fn) {
    return [this, mutating, fn](const httplib::Request& req, httplib::Response& res) {
      std::string header = req.get_header_value("Authorization");
      const Actor* who = nullptr;
      if (header.rfind("Bearer ", 0) == 0) who = users_.Authenticate(header.substr(7));
      if (who && (who->role == Role::kAgent) != (req.path.rfind("/v1/agent/", 0) == 0) && !(who->admin())) {
        ReplyError(res, 403, "forbidden",
                   who->role == Role::kAgent ? "an agent token may use /v1/agent/* only"
                                             : "only node agents (and admins) use /v1/agent/*",
                   "Authorization");
        return;
      }
      if (!who) {
        if (mutating) controller_.RecordAudit({"-", "", Role::kUser}, req.method + " " + req.path, "", 401, "refused");
        res.set_header("WWW-Authenticate", "Bearer");
        ReplyError(res, 401, "unauthenticated",
                   header.empty() ? "an Authorization: Bearer token is required" : "the token is not valid",
                   "Authorization");
        return;
      }
      fn(*who, req, res);
    };
  };

  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this, authed](const httplib::Request& req, httplib::Response& res) {
    auto serve = [this](const Actor&, const httplib::Request&, httplib::Response& r) {
      r.set_content(controller_.Metrics(), "text/plain; version=0.0.4");
    };
    if (options_.open_metrics) {
      serve({}, req, res);
    } else {
      authed(false, serve)(req, res);
    }
  });
  s.Get("/v1/whoami", authed(false, [](const Actor& who, const httplib::Request&, httplib::Response& res) {
          Reply(res, {200, {{"user", who.user}, {"team", who.team}, {"role", ToString(who.role)}}});
        }));

  s.Post("/v1/jobs", authed(true, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           if (req.body.empty()) return ReplyError(res, 400, "invalid_argument", "the request body is empty", "body");
           auto spec = ParseJobSpecText(req.body);
           if (!spec) {
             controller_.RecordAudit(who, "POST /v1/jobs", "", 400, "refused");
             return Reply(res, ApiResult::FromStatus(spec.status()));
           }
           std::string key = req.get_header_value("Idempotency-Key");
           if (key.size() > 255) {
             return ReplyError(res, 400, "invalid_argument", "longer than 255 characters", "Idempotency-Key");
           }
           Reply(res, controller_.Submit(who, std::move(*spec), key));
         }));
  s.Get("/v1/jobs", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"state", "team", "user", "limit"})) return;
          JobFilter f;
          f.state = req.get_param_value("state");
          f.team = req.get_param_value("team");
          f.user = req.get_param_value("user");
          int64_t limit = 500;
          if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
          f.limit = static_cast<int>(limit);
          Reply(res, controller_.ListJobs(who, f));
        }));
  s.Get(R"(/v1/jobs/([^/]+))",
        authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.GetJob(who, req.matches[1]));
        }));
  s.Delete(R"(/v1/jobs/([^/]+))",
           authed(true, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             if (!OnlyParams(req, res, {})) return;
             Reply(res, controller_.Cancel(who, req.matches[1]));
           }));
  s.Post(R"(/v1/jobs/([^/]+)/checkpoint-done)",
         authed(true, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           if (!OnlyParams(req, res, {})) return;
           Reply(res, controller_.CheckpointDone(who, req.matches[1]));
         }));
  s.Get(R"(/v1/jobs/([^/]+)/events)",
        authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          Reply(res, controller_.Events(who, req.matches[1]));
        }));
  s.Get(R"(/v1/jobs/([^/]+)/logs)",
        authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"stream", "offset"})) return;
          std::string id = req.matches[1];
          ApiResult job = controller_.GetJob(who, id);  // 404 for other teams' jobs
          if (job.status != 200) return Reply(res, job);
          std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
          if (stream != "stdout" && stream != "stderr") {
            return ReplyError(res, 400, "invalid_argument", "must be stdout or stderr", "stream");
          }
          int64_t offset = 0;
          if (!IntParam(req, res, "offset", 0, INT64_MAX, &offset)) return;
          if (!options_.log_path) return ReplyError(res, 404, "not_found", "this server keeps no logs");
          std::ifstream in(options_.log_path(id, stream), std::ios::binary);
          std::string chunk;
          if (in) {
            in.seekg(0, std::ios::end);
            int64_t size = in.tellg();
            if (offset < size) {
              int64_t n = std::min<int64_t>(size - offset, 1 << 20);
              chunk.resize(static_cast<size_t>(n));
              in.seekg(offset);
              in.read(chunk.data(), n);
            }
          }
          res.set_header("X-Log-Offset", std::to_string(offset + static_cast<int64_t>(chunk.size())));
          res.set_header("X-Job-State", job.body.value("state", ""));
          res.set_content(chunk, "text/plain");
        }));
  s.Get("/v1/queue", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Queue(who));
        }));
  s.Get("/v1/cluster", authed(false, [this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Cluster());
        }));
  s.Get("/v1/nodes", authed(false, [this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Nodes());
        }));
  for (bool drain : {true, false}) {
    s.Post(drain ? R"(/v1/nodes/([^/]+)/drain)" : R"(/v1/nodes/([^/]+)/undrain)",
           authed(true, [this, drain](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             if (!OnlyParams(req, res, {"gpu"})) return;
             int64_t gpu = -1;
             if (!IntParam(req, res, "gpu", 0, 63, &gpu)) return;
             Reply(res, controller_.SetDrain(who, req.matches[1], static_cast<int>(gpu), drain));
           }));
  }
  s.Get(R"(/v1/nodes/([^/]+)/gpus)",
        authed(false, [this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.NodeGpus(req.matches[1]));
        }));
  s.Get(R"(/v1/nodes/([^/]+)/events)",
        authed(false, [this](const Actor&, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"limit"})) return;
          int64_t limit = 100;
          if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
          Reply(res, controller_.NodeHistory(req.matches[1], static_cast<int>(limit)));
        }));
  s.Post(R"(/v1/nodes/([^/]+)/gpus/(\d+)/fault)",
         authed(true, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
           std::string target = std::string(req.matches[1]) + ":" + std::string(req.matches[2]);
           std::string action = "POST /v1/nodes/" + std::string(req.matches[1]) + "/gpus/fault";
           if (!who.admin()) {
             controller_.RecordAudit(who, action, target, 403, "refused");
             return ReplyError(res, 403, "forbidden", "only admins inject faults");
           }
           if (!options_.inject_fault) return ReplyError(res, 404, "not_found", "this server runs no fake GPUs");
           nlohmann::json fault = nlohmann::json::parse(req.body, nullptr, false);
           if (!fault.is_object()) return ReplyError(res, 400, "invalid_argument", "expected a JSON object", "body");
           Status s = options_.inject_fault(req.matches[1], std::stoi(req.matches[2]), fault);
           controller_.RecordAudit(who, action, target, s.ok() ? 200 : 400,
                                   fault.dump(-1, ' ', false, kReplaceBadUtf8));
           if (!s.ok()) return Reply(res, ApiResult::FromStatus(s));
           Reply(res, {200, {{"injected", fault}}});
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
           authed(false, [hub, body_json](const Actor&, const httplib::Request& req, httplib::Response& res) {
             nlohmann::json body;
             if (body_json(req, res, &body)) Reply(res, hub->Register(body));
           }));
    s.Get("/v1/agent/orders",
          authed(false, [this, hub](const Actor&, const httplib::Request& req, httplib::Response& res) {
            if (!OnlyParams(req, res, {"node", "session", "ack", "wait"})) return;
            int64_t wait = 0, session = 0, ack = 0;
            if (!IntParam(req, res, "wait", 0, options_.max_poll_s, &wait)) return;
            if (!IntParam(req, res, "session", 0, INT64_MAX, &session)) return;
            if (!IntParam(req, res, "ack", 0, INT64_MAX, &ack)) return;
            Reply(res, hub->Poll(req.get_param_value("node"), static_cast<uint64_t>(session),
                                 static_cast<uint64_t>(ack), static_cast<int>(wait)));
          }));
    s.Post("/v1/agent/report",
           authed(false, [hub, body_json](const Actor&, const httplib::Request& req, httplib::Response& res) {
             nlohmann::json body;
             if (body_json(req, res, &body)) Reply(res, hub->Report(body));
           }));
  }
  s.Get("/v1/usage", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"from", "to", "team", "by"})) return;
          UsageQuery q;
          const Calendar& cal = controller_.calendar();
          TimeMs now = controller_.CurrentTime();
          q.from = cal.MonthStart(now);
          for (auto [name, out] : {std::pair{"from", &q.from}, {"to", &q.to}}) {
            if (!req.has_param(name)) continue;
            auto t = cal.ParseDate(req.get_param_value(name), name);
            if (!t) return Reply(res, ApiResult::FromStatus(t.status()));
            *out = *t;
          }
          q.team = req.get_param_value("team");
          if (req.has_param("by")) q.by = req.get_param_value("by");
          Reply(res, controller_.Usage(who, q));
        }));
  s.Get("/v1/reports/monthly",
        authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"month", "format"})) return;
          std::string month = req.has_param("month") ? req.get_param_value("month")
                                                     : controller_.calendar().MonthOf(controller_.CurrentTime());
          std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
          if (format != "json" && format != "csv" && format != "html") {
            return ReplyError(res, 400, "invalid_argument", "must be json, csv or html", "format");
          }
          ApiResult r = controller_.MonthlyReport(who, month);
          if (r.status != 200 || format == "json") return Reply(res, r);
          if (format == "csv") {
            res.set_header("Content-Disposition", "attachment; filename=\"gantry-" + month + ".csv\"");
            return res.set_content(ReportCsv(r.body), "text/csv");
          }
          res.set_content(ReportHtml(r.body), "text/html; charset=utf-8");
        }));
  s.Get("/v1/budgets", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Budgets(who));
        }));
  s.Get("/v1/alerts", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {})) return;
          Reply(res, controller_.Alerts(who));
        }));
  s.Get("/v1/audit", authed(false, [this](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"limit"})) return;
          int64_t limit = 100;
          if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
          Reply(res, controller_.AuditLog(who, static_cast<int>(limit)));
        }));
}

}  // namespace gantry
