// Status and Expected<T>: the error currency at module boundaries. A Status names the
// offending input field so a user-facing error can say exactly what to fix.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace gantry {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kPermissionDenied,
  kInternal,
  kUnauthenticated,  // no credentials, or ones nobody holds
  kTooLarge,         // a request or payload over its limit
  kKeyReused,        // an idempotency key reused for a different request
  kOverLimit,        // a site limit (jobs pending, tasks per request) would be passed
  kUnavailable,      // not now: the caller may try again shortly
};

// The error's name in API answers and the audit log ("not_found", "forbidden", ...; "ok").
inline const char* CodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kPermissionDenied: return "forbidden";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kTooLarge: return "payload_too_large";
    case StatusCode::kKeyReused: return "idempotency_mismatch";
    case StatusCode::kOverLimit: return "over_limit";
    case StatusCode::kUnavailable: return "unavailable";
  }
  return "internal";
}

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  static Status Ok() { return {}; }
  static Status Invalid(std::string field, std::string message) {
    return {StatusCode::kInvalidArgument, std::move(message), std::move(field)};
  }
  static Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
  static Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }
  static Status Precondition(std::string field, std::string message) {
    return {StatusCode::kFailedPrecondition, std::move(message), std::move(field)};
  }
  static Status Denied(std::string field, std::string message) {
    return {StatusCode::kPermissionDenied, std::move(message), std::move(field)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& field() const { return field_; }
  // "field: message", or the message alone when no field is known.
  std::string ToString() const { return field_.empty() ? message_ : field_ + ": " + message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : data_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Expected(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(data_).ok()) std::abort();     // an error must carry a non-OK status
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(data_); }
  T& value() & { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Status& status() const { return std::get<Status>(data_); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace gantry
