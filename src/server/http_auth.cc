// Sign-in routes: what the dashboard and the CLI ask of the identity service. The browser's
// code flow (/auth/login, /auth/callback) keeps the session's refresh token in an HttpOnly
// cookie only /v1/auth/* sees; the CLI's device flow hands both tokens to the CLI.
#include <fmt/format.h>
#include <httplib.h>

#include "core/html_util.h"
#include "server/http_api.h"
#include "server/identity_service.h"

namespace gantry {

namespace {

constexpr const char* kRefreshCookie = "gantry_refresh";
constexpr const char* kSignInCookie = "gantry_signin";

// The value of cookie `name` in the request's Cookie headers ("" when absent).
std::string CookieValue(const httplib::Request& req, const std::string& name) {
  const size_t headers = req.get_header_value_count("Cookie");
  for (size_t i = 0; i < headers; ++i) {
    std::string all = req.get_header_value("Cookie", i);
    size_t pos = 0;
    while (pos < all.size()) {
      size_t end = all.find(';', pos);
      if (end == std::string::npos) end = all.size();
      std::string pair = all.substr(pos, end - pos);
      pair.erase(0, pair.find_first_not_of(' '));
      if (pair.rfind(name + "=", 0) == 0) return pair.substr(name.size() + 1);
      pos = end + 1;
    }
  }
  return "";
}

std::string Cookie(const std::string& name, const std::string& value, const std::string& path, const char* same_site,
                   int64_t max_age_s, bool secure) {
  return fmt::format("{}={}; Path={}; Max-Age={}; HttpOnly; SameSite={}{}", name, value, path, max_age_s, same_site,
                     secure ? "; Secure" : "");
}

// The JSON object a sign-in call sent, or null after answering 400.
std::optional<nlohmann::json> BodyObject(const httplib::Request& req, httplib::Response& res) {
  if (req.body.empty()) return nlohmann::json::object();
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    ReplyError(res, 400, "invalid_argument", "the body must be a JSON object", "body");
    return std::nullopt;
  }
  return body;
}

std::string StringOf(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

// Whether a browser's request comes from this server's own pages: its Origin (browsers send
// one with every POST) is the server's public URL, or the address it was asked at. Callers
// that are not browsers send none.
bool FromOwnPages(const httplib::Request& req, const std::string& public_url, bool secure) {
  if (!req.has_header("Origin")) return true;
  std::string origin = req.get_header_value("Origin");
  std::string own = public_url;
  while (!own.empty() && own.back() == '/') own.pop_back();
  if (!own.empty()) {
    size_t path = own.find('/', own.find("://") == std::string::npos ? 0 : own.find("://") + 3);
    if (path != std::string::npos) own.resize(path);
    if (origin == own) return true;
  }
  return origin == std::string(secure ? "https://" : "http://") + req.get_header_value("Host");
}

// Where the dashboard goes after signing in: one of its own pages (#/jobs), never elsewhere.
std::string SafeNext(const std::string& next) {
  if (next.size() > 200 || next.rfind("#/", 0) != 0) return "";
  return next.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789#/_-.=&?") ==
                 std::string::npos
             ? next
             : "";
}

void SignInPage(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'");
  res.set_header("Cache-Control", "no-store");
  res.set_content(fmt::format("<!doctype html><meta charset=utf-8><title>Gantry sign-in</title>"
                              "<body style=\"font-family:sans-serif;margin:3em\"><h1>Sign-in did not complete</h1>"
                              "<p id=reason>{}</p><p><a href=\"/\">Back to the dashboard</a></p>",
                              HtmlEscape(message)),
                  "text/html; charset=utf-8");
}

}  // namespace

bool IsOpenAuthPath(std::string_view path) {
  return path == "/v1/auth/refresh" || path == "/v1/auth/device" || path == "/v1/auth/device/token" ||
         path == "/v1/auth/logout";
}

void HttpApi::AuthRoutes() {
  httplib::Server& s = *server_;
  IdentityService* id = options_.identity;
  s.Get("/v1/auth/config", [id](const httplib::Request&, httplib::Response& res) {
    Send(res, 200, id ? id->PublicConfig() : nlohmann::json{{"oidc", false}});
  });
  s.Get("/v1/tokens", Authed([id](const Actor& who, const httplib::Request&, httplib::Response& res) {
          if (!id) return Send(res, 200, {{"sessions", nlohmann::json::array()}});
          Reply(res, id->ListSessions(who));
        }));
  s.Delete(R"(/v1/tokens/([A-Za-z0-9_-]{1,64}))",
           Authed([id](const Actor& who, const httplib::Request& req, httplib::Response& res) {
             if (!id) return ReplyError(res, 404, "not_found", "no session " + std::string(req.matches[1]));
             Reply(res, id->Revoke(who, req.matches[1]));
           }));
  if (!id) return;

  // Secure cookies where browsers reach the server over HTTPS, a proxy's TLS included.
  const bool secure = options_.tls_served || options_.public_url.rfind("https://", 0) == 0;
  const std::string public_url = options_.public_url;
  auto redirect_uri = [public_url, secure](const httplib::Request& req) {
    if (!public_url.empty()) return public_url + "/auth/callback";
    return std::string(secure ? "https://" : "http://") + req.get_header_value("Host") + "/auth/callback";
  };

  // The dashboard's "Sign in with ..." button: off to the provider, with a cookie binding
  // the sign-in to this browser.
  s.Get("/auth/login", [id, redirect_uri, secure](const httplib::Request& req, httplib::Response& res) {
    auto start = id->StartBrowserSignIn(redirect_uri(req), SafeNext(req.get_param_value("next")), req.remote_addr);
    if (!start) return SignInPage(res, HttpStatus(start.status().code()), start.status().message());
    res.set_header("Set-Cookie", Cookie(kSignInCookie, start->cookie, "/auth", "Lax", 600, secure));
    res.set_header("Cache-Control", "no-store");
    res.set_redirect(start->url, 302);
  });
  s.Get("/auth/callback", [id, secure](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("error")) {
      std::string why = req.get_param_value("error").substr(0, 80);
      std::string more = req.get_param_value("error_description").substr(0, 200);
      // The provider's words only for a sign-in under way in this browser: anyone can put
      // words in this URL.
      if (!id->AbandonBrowserSignIn(req.get_param_value("state"), CookieValue(req, kSignInCookie),
                                    why + (more.empty() ? "" : ": " + more), req.remote_addr)) {
        return SignInPage(res, 400, "No sign-in is under way in this browser: start again.");
      }
      return SignInPage(res, 401, "The identity provider answered: " + why + (more.empty() ? "" : " (" + more + ")"));
    }
    std::string next;
    auto signed_in = id->FinishBrowserSignIn(req.get_param_value("code"), req.get_param_value("state"),
                                             CookieValue(req, kSignInCookie), req.remote_addr, &next);
    if (!signed_in) return SignInPage(res, HttpStatus(signed_in.status().code()), signed_in.status().message());
    const Session& session = signed_in->tokens.session;
    res.set_header("Set-Cookie", Cookie(kSignInCookie, "", "/auth", "Lax", 0, secure));
    res.headers.emplace("Set-Cookie", Cookie(kRefreshCookie, signed_in->tokens.refresh_token, "/v1/auth", "Strict",
                                             (session.expires_ms - session.created_ms) / 1000, secure));
    res.set_header("Cache-Control", "no-store");
    res.set_redirect("/" + next, 302);
  });

  // New tokens: the CLI sends its refresh token, the dashboard its cookie.
  s.Post("/v1/auth/refresh", [id, secure, public_url](const httplib::Request& req, httplib::Response& res) {
    auto body = BodyObject(req, res);
    if (!body) return;
    std::string token = StringOf(*body, "refresh_token");
    const bool from_cookie = token.empty();
    if (from_cookie && !FromOwnPages(req, public_url, secure)) {
      return ReplyError(res, 403, "forbidden", "a request from another site's page may not use the session cookie",
                        "Origin");
    }
    if (from_cookie) token = CookieValue(req, kRefreshCookie);
    if (token.empty()) return ReplyError(res, 401, "unauthenticated", "no refresh token: sign in", "refresh_token");
    auto signed_in = id->Refresh(token, req.remote_addr);
    // A refused cookie is left as it is: another tab's refresh at the same moment may have
    // just set its successor, which clearing it here would take away.
    if (!signed_in) return Reply(res, signed_in.status());
    nlohmann::json view = signed_in->View();
    if (from_cookie) {  // the refresh token stays in the cookie, out of the page's reach
      view.erase("refresh_token");
      const Session& session = signed_in->tokens.session;
      res.set_header("Set-Cookie",
                     Cookie(kRefreshCookie, signed_in->tokens.refresh_token, "/v1/auth", "Strict",
                            (session.expires_ms - signed_in->tokens.session.last_used_ms) / 1000, secure));
    }
    res.set_header("Cache-Control", "no-store");
    Send(res, 200, view);
  });
  s.Post("/v1/auth/logout", [id, secure, public_url](const httplib::Request& req, httplib::Response& res) {
    auto body = BodyObject(req, res);
    if (!body) return;
    if (!FromOwnPages(req, public_url, secure)) {
      return ReplyError(res, 403, "forbidden", "a request from another site's page may not sign anyone out", "Origin");
    }
    // The session of whichever the caller holds: its access token, its refresh token, the cookie.
    std::string header = req.get_header_value("Authorization");
    bool ended = false;
    for (const std::string& token : {header.rfind("Bearer ", 0) == 0 ? header.substr(7) : std::string(),
                                     StringOf(*body, "refresh_token"), CookieValue(req, kRefreshCookie)}) {
      ended = ended || (!token.empty() && id->SignOut(token, req.remote_addr));
    }
    res.set_header("Set-Cookie", Cookie(kRefreshCookie, "", "/v1/auth", "Strict", 0, secure));
    Send(res, 200, {{"signed_out", ended}});
  });

  // The CLI's device grant (gantry login): started here, finished at the provider.
  s.Post("/v1/auth/device", [id](const httplib::Request& req, httplib::Response& res) {
    auto started = id->StartDeviceSignIn(req.remote_addr);
    if (!started) return Reply(res, started.status());
    Send(res, 200,
         {{"device_code", started->device_code},
          {"user_code", started->user_code},
          {"verification_uri", started->verification_uri},
          {"verification_uri_complete", started->verification_uri_complete},
          {"interval", started->interval_s},
          {"expires_in", started->expires_in_s}});
  });
  s.Post("/v1/auth/device/token", [id](const httplib::Request& req, httplib::Response& res) {
    auto body = BodyObject(req, res);
    if (!body) return;
    std::string device_code = StringOf(*body, "device_code");
    if (device_code.empty()) return ReplyError(res, 400, "invalid_argument", "is required", "device_code");
    auto signed_in = id->FinishDeviceSignIn(device_code, req.remote_addr);
    if (!signed_in && signed_in.status().code() == StatusCode::kUnavailable &&
        signed_in.status().field() == "device_code") {  // not yet: RFC 8628's answers, as codes
      return ReplyError(
          res, 400, signed_in.status().message(),
          signed_in.status().message() == "slow_down" ? "ask less often" : "the user has not finished yet",
          "device_code");
    }
    if (!signed_in) return Reply(res, signed_in.status());
    res.set_header("Cache-Control", "no-store");
    Send(res, 200, signed_in->View());
  });

  // A login node asks for a session for one of its Unix users.
  s.Post("/v1/auth/login-node", Authed([id](const Actor& host, const httplib::Request& req, httplib::Response& res) {
           auto body = BodyObject(req, res);
           if (!body) return;
           auto signed_in = id->LoginNodeSession(host, *body, req.remote_addr);
           if (!signed_in) return Reply(res, signed_in.status());
           res.set_header("Cache-Control", "no-store");
           Send(res, 200, signed_in->View());
         }));
}

}  // namespace gantry
