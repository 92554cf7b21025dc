// Status and Result<T>: cheap error values for code that must not throw.
//
// The scheduler core and everything it links returns errors as values. Library exceptions
// (YAML, JSON, CSV parsing) are caught at the edges and turned into a Status whose message says
// what went wrong and where ("trace.csv:12: duration must be a number, got 'x'").
// Thread-safety: plain values; copy freely.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "common/check.h"

namespace gpufleet {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong; retrying will not help
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kUnavailable,  // an environmental failure that may pass (file busy, peer away)
  kInternal,
  kResourceExhausted,  // a limit is reached (a team's quota of waiting jobs); may pass later
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {StatusCode::kAlreadyExists, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) {
    return {StatusCode::kFailedPrecondition, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", or "ok".
  std::string ToString() const;
  // A copy whose message is prefixed with `context: `; for adding the file or field name.
  Status WithContext(const std::string& context) const;

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T> holds either a T or a non-OK Status, shaped like std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    CHECK(!std::get<Status>(v_).ok()) << "Result built from an OK status";
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    CHECK(ok()) << status().ToString();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CHECK(ok()) << status().ToString();
    return std::get<T>(v_);
  }
  T&& value() && {
    CHECK(ok()) << status().ToString();
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpufleet

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define GF_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::gpufleet::Status gf_status_ = (expr); \
    if (!gf_status_.ok()) return gf_status_; \
  } while (0)

#define GF_CONCAT_INNER(a, b) a##b
#define GF_CONCAT(a, b) GF_CONCAT_INNER(a, b)
// Declares `lhs` from a Result<T> expression, or returns its Status.
#define GF_ASSIGN_OR_RETURN(lhs, expr) GF_ASSIGN_OR_RETURN_IMPL(GF_CONCAT(gf_result_, __LINE__), lhs, expr)
#define GF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
