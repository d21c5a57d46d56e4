// A blocking HTTP/1.1 client (Boost.Beast) for the CLI and node-to-node calls. One request per
// call, its own connection. Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sediment::http {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// `url` is http://HOST:PORT/PATH?QUERY. Unavailable when the server cannot be reached.
Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body,
                             std::chrono::seconds timeout = std::chrono::seconds(300));

}  // namespace sediment::http
