// A blocking HTTP/1.1 client (Boost.Beast) for the CLI and node-to-node calls. One request per
// call, its own connection. Thread-safe (no shared state).
#pragma once

#include <atomic>
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
  // Interim (1xx) answers received before this one, e.g. the "102 Processing" progress answers
  // of FetchOptions::progress_interval.
  int interim_answers = 0;
};

// The request header by which a client asks the server for a "102 Processing" interim answer
// every that many milliseconds while its handler runs (http::Server honours it).
inline constexpr const char* kProgressIntervalHeader = "X-Sediment-Progress-Ms";

struct FetchOptions {
  // Bound of the whole exchange, from connecting to the last byte of the answer; zero = none.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Once the request is sent: the longest wait for the next byte of the answer (interim answers
  // count); zero = none. A server that accepted the request and then froze (SIGSTOP, a stalled
  // VM: its kernel still holds the connection) is given up after this long.
  std::chrono::milliseconds progress_timeout{0};
  // When positive, the request carries kProgressIntervalHeader with this value, so a sediment
  // server that works on the answer for longer than progress_timeout still shows progress. Keep it
  // well below progress_timeout.
  std::chrono::milliseconds progress_interval{0};
  // Not owned; must outlive the call. Checked at least every 20 ms: once true, the exchange is
  // abandoned (the connection closed) and Fetch returns Cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

// `url` is http://HOST:PORT/PATH?QUERY. Unavailable when the server cannot be reached, when the
// connection fails, or when a bound of `options` passed first (the message says which); Cancelled
// when `options.cancel` turned true first. Any complete final answer (also 4xx/5xx) is returned
// as a ClientResponse.
Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, const FetchOptions& options);

// Fetch with only a bound of the whole exchange.
Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body,
                             std::chrono::seconds timeout = std::chrono::seconds(300));

}  // namespace sediment::http
