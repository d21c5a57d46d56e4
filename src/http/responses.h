#pragma once

// Successful answers of the JSON API routes (errors: http::JsonError / http::JsonErrorFor).

#include <string>
#include <utility>

#include "http/http_server.h"

namespace sediment::http {

// `body` (a JSON document) with `status`; the content type is Response's default (JSON).
inline Response JsonBody(std::string body, int status = 200) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// 204 with no body and no content type.
inline Response NoContent() {
  Response r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

}  // namespace sediment::http
