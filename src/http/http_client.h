// A blocking HTTP/1.1 client (Boost.Beast) for the CLI and node-to-node calls, over plain TCP
// (http://) or TLS (https://, OpenSSL). One request per call, its own connection. Thread-safe (no
// shared state).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
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
  // Reads it took to receive the answers (each up to 64 KiB); for tests and diagnostics.
  int reads = 0;
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
  // https:// only. PEM file of the CAs the server's certificate must chain to; empty = the
  // system's default verify paths. A file that cannot be loaded makes Fetch InvalidArgument.
  std::string ca_file;
  // https:// only. When true the certificate must name the URL's host: a host name is checked
  // against the DNS names (subjectAltName, else the CN), an IP literal against the IP addresses
  // (subjectAltName). A host name is also sent as SNI (an IP literal never is).
  bool verify_host = true;
};

// `url` is http://HOST[:PORT]/PATH?QUERY or https://...; HOST may be a name, an IPv4 literal or a
// bracketed IPv6 literal; the port defaults to 80 / 443. Unavailable when the server cannot be
// reached, when the connection fails, when a bound of `options` passed first (the message says
// which), when the TLS handshake fails (the message says why: "TLS: the certificate of H:P is not
// trusted: <OpenSSL's reason>" for a certificate that does not chain to the CAs or does not name
// the host, "TLS handshake with H:P failed: ..." otherwise, e.g. a plain HTTP server);
// Cancelled when `options.cancel` turned true first; InvalidArgument for a malformed URL or a CA
// file that cannot be loaded. Any complete final answer (also 4xx/5xx) is returned as a
// ClientResponse.
Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, const FetchOptions& options);

// Fetch with only a bound of the whole exchange.
Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body,
                             std::chrono::seconds timeout = std::chrono::seconds(300));

// How a node calls its peers (node-to-node calls): over HTTPS verified against `ca_file` when the
// node's own listener speaks TLS (every node of a cluster is configured alike), plain HTTP
// otherwise. Built once from the node's configuration and handed to every part that calls peers,
// so the choice is made in one place. A plain value: copyable, immutable once built.
struct PeerTls {
  bool https = false;
  // PEM CA bundle the peers' certificates must chain to; empty = the system's default paths.
  std::string ca_file;

  // The URL of `path` (with its query) on the peer at `address` (HOST:PORT).
  std::string Url(std::string_view address, std::string_view path) const;
  // `base` with the CA to verify peers against and host verification on (the peer's
  // certificate must name the address it is called at).
  FetchOptions Options(FetchOptions base = {}) const;
  // OK when peers are called over plain HTTP or the CA bundle loads; InvalidArgument naming the
  // file otherwise (so a node can refuse to start rather than fail every peer call).
  Status Check() const;
};

}  // namespace sediment::http
