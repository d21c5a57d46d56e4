// Errors as values. Status carries a code and a human-readable message; Result<T> is a value or a
// Status. Both are [[nodiscard]]: ignoring an error is a compile warning.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sediment {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // caller sent something malformed (maps to HTTP 400)
  kNotFound,
  kAlreadyExists,
  kCorruption,        // checksum / format violation in stored data
  kIOError,           // the OS said no
  kUnavailable,       // transient: retry later (maps to HTTP 503)
  kUnauthenticated,   // missing / unknown token (HTTP 401)
  kPermissionDenied,  // token valid but not for this (HTTP 403)
  kTooLarge,          // body or event over a limit (HTTP 413)
  kRejected,          // a conditional Global event lost (stale epoch, version mismatch)
  kAborted,
  kDeadlineExceeded,   // a time limit passed (a query's; HTTP 408)
  kCancelled,          // the caller cancelled the work
  kResourceExhausted,  // a memory or size bound of the work was reached (HTTP 413)
  kInternal,
  // The system is not in the state the operation requires and retrying will not help until an
  // operator changes it (e.g. a Kafka topic whose retention can delete unstored events); the
  // message says what to change.
  kFailedPrecondition,
};

const char* StatusCodeName(StatusCode code);

// A finer cause inside a code, for the callers that must tell one case from another (never by the
// message text, which is for people). Kept by WithContext; kNone for most statuses.
enum class StatusSubcode {
  kNone = 0,
  // Global: the log no longer holds events between the loaded state and the log's start (it was
  // truncated past this node's snapshots); a newer state (a peer's) is needed.
  kLogTruncatedPastState,
  // Global: the log begins with a recovery from the bucket made by another node; start from that
  // node's snapshot.
  kLogBeginsWithRecovery,
  // S3 CreateBucket: the bucket exists and belongs to the caller (BucketAlreadyOwnedByYou).
  kBucketAlreadyOwned,
  // ResourceExhausted: every place of a concurrency limit is taken (HTTP 429); retry later.
  kConcurrencyLimit,
  // Ingest: a HEC event object without its "event" field (Splunk's code 12).
  kEventFieldRequired,
  // Ingest: a HEC event whose "event" is null or "" (Splunk's code 13).
  kEventFieldBlank,
};

const char* StatusSubcodeName(StatusSubcode subcode);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Unauthenticated(std::string m) {
    return {StatusCode::kUnauthenticated, std::move(m)};
  }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status TooLarge(std::string m) { return {StatusCode::kTooLarge, std::move(m)}; }
  static Status Rejected(std::string m) { return {StatusCode::kRejected, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  StatusSubcode subcode() const { return subcode_; }
  // A copy carrying `subcode` (an OK status stays OK, without one).
  Status WithSubcode(StatusSubcode subcode) const;
  const std::string& message() const { return message_; }
  // "Corruption: segment 12: bad footer checksum"
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context: ` (code and subcode kept).
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  StatusSubcode subcode_ = StatusSubcode::kNone;
  std::string message_;
};

// A value of T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace sediment

#define SEDIMENT_CONCAT_INNER(a, b) a##b
#define SEDIMENT_CONCAT(a, b) SEDIMENT_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)        \
  do {                               \
    ::sediment::Status _st = (expr); \
    if (!_st.ok()) return _st;       \
  } while (0)

// ASSIGN_OR_RETURN(auto x, SomethingReturningResult());
#define ASSIGN_OR_RETURN(lhs, expr)                                                             \
  auto SEDIMENT_CONCAT(_res_, __LINE__) = (expr);                                               \
  if (!SEDIMENT_CONCAT(_res_, __LINE__).ok()) return SEDIMENT_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(SEDIMENT_CONCAT(_res_, __LINE__)).value()
