#include "common/status.h"

namespace sediment {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIOError:
      return "IOError";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kUnauthenticated:
      return "Unauthenticated";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kTooLarge:
      return "TooLarge";
    case StatusCode::kRejected:
      return "Rejected";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

const char* StatusSubcodeName(StatusSubcode subcode) {
  switch (subcode) {
    case StatusSubcode::kNone:
      return "None";
    case StatusSubcode::kLogTruncatedPastState:
      return "LogTruncatedPastState";
    case StatusSubcode::kLogBeginsWithRecovery:
      return "LogBeginsWithRecovery";
    case StatusSubcode::kBucketAlreadyOwned:
      return "BucketAlreadyOwned";
    case StatusSubcode::kConcurrencyLimit:
      return "ConcurrencyLimit";
    case StatusSubcode::kEventFieldRequired:
      return "EventFieldRequired";
    case StatusSubcode::kEventFieldBlank:
      return "EventFieldBlank";
  }
  return "Unknown";
}

Status Status::WithSubcode(StatusSubcode subcode) const {
  if (ok()) return *this;
  Status out = *this;
  out.subcode_ = subcode;
  return out;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  Status out(code_, context + ": " + message_);
  out.subcode_ = subcode_;
  return out;
}

}  // namespace sediment
