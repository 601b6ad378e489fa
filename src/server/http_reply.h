// The REST API's answers: JSON bodies, and errors as {"error": {code, message, field}} with
// the HTTP status their code maps to. Shared by the route files.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace gantry {

// The HTTP status an answer of this code is sent with: the one place Status codes become
// HTTP (401, 403, 404, 409, 413, 422, 500; 200 for kOk).
int HttpStatus(StatusCode code);
// The JSON body of a refusal: {"error": {"code", "message", "field"}} (field when known).
nlohmann::json ErrorJson(const Status& refusal);
nlohmann::json ErrorBody(const std::string& code, const std::string& message, const std::string& field);

void Send(httplib::Response& res, int status, const nlohmann::json& body);
void Reply(httplib::Response& res, const Status& refusal);
void Reply(httplib::Response& res, const Expected<nlohmann::json>& answer);
void ReplyError(httplib::Response& res, int status, const std::string& code, const std::string& message,
                const std::string& field = "");
// False after answering 400 naming the first query parameter not in `known`.
bool OnlyParams(const httplib::Request& req, httplib::Response& res, std::initializer_list<const char*> known);
// Reads the integer query parameter `name` (left as it is when absent); false after
// answering 400 when it is not an integer within lo..hi.
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t lo, int64_t hi,
              int64_t* out);

}  // namespace gantry
