// The REST API's JSON answers and error bodies.
#include "server/http_reply.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>
#include <set>

#include "protocol/spec_json.h"

namespace gantry {

int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kTooLarge: return 413;
    case StatusCode::kKeyReused: return 422;
    case StatusCode::kOverLimit: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

nlohmann::json ErrorJson(const Status& refusal) {
  nlohmann::json e = {{"code", CodeName(refusal.code())}, {"message", refusal.message()}};
  if (!refusal.field().empty()) e["field"] = refusal.field();
  return {{"error", e}};
}

nlohmann::json ErrorBody(const std::string& code, const std::string& message, const std::string& field) {
  nlohmann::json e = {{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  return {{"error", e}};
}

void Send(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, kReplaceBadUtf8), "application/json");
}

void Reply(httplib::Response& res, const Status& refusal) { Send(res, HttpStatus(refusal.code()), ErrorJson(refusal)); }

void Reply(httplib::Response& res, const Expected<nlohmann::json>& answer) {
  if (!answer) return Reply(res, answer.status());
  Send(res, 200, *answer);
}

void ReplyError(httplib::Response& res, int status, const std::string& code, const std::string& message,
                const std::string& field) {
  Send(res, status, ErrorBody(code, message, field));
}

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

}  // namespace gantry
