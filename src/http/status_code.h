// The HTTP status that answers a failed Status: the one mapping every route uses.
#pragma once

#include "common/status.h"
#include "http/http_server.h"

namespace sediment::http {

// 400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound, 408
// DeadlineExceeded, 413 TooLarge and ResourceExhausted (429 with subcode kConcurrencyLimit), 503
// Unavailable, 500 for the rest.
inline int StatusCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
      return 413;
    case StatusCode::kResourceExhausted:
      return st.subcode() == StatusSubcode::kConcurrencyLimit ? 429 : 413;
    case StatusCode::kDeadlineExceeded:
      return 408;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// The JSON error answer of a failed Status: StatusCodeFor's code and the status's message.
inline Response JsonErrorFor(const Status& st) {
  return JsonError(StatusCodeFor(st), st.message());
}

}  // namespace sediment::http
