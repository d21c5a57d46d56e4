// A small asynchronous HTTP/1.1 server (HTTPS when given a certificate) on Boost.Asio/Beast: a
// fixed pool of I/O threads serves every connection (reads, writes, deadlines; an idle keep-alive
// connection costs no thread), complete requests are handled on a bounded pool of handler
// threads, keep-alive, request bodies bounded by max_body_bytes (413 beyond), complete or
// streamed (chunked) response bodies. Routing is the caller's: one Handler gets every request.
// Thread-safety: the handler is called concurrently from handler threads (never from an I/O
// thread, so it may block).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/background_loop.h"
#include "common/status.h"

namespace sediment::http {

struct Request {
  std::string method;                        // "GET", "POST", ...
  std::string path;                          // decoded path without the query string
  std::map<std::string, std::string> query;  // decoded query parameters (last one wins)
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string body;
  std::string remote;  // peer address
  // Whether the client is still connected, as BodyWriter::Connected judges it (false once it
  // closed or reset the connection, also when it only closed its sending side, or the server is
  // stopping). Set by Server for every request it reads; empty when the request did not come from
  // a socket. Callable from any thread, but only while the handler that got this request runs
  // (the socket may be reused after it returns).
  std::function<bool()> client_connected;

  // Case-insensitive header lookup; empty when absent.
  std::string_view Header(std::string_view name) const;
};

// The sink of a streamed response body (Response::stream). Used by one thread, only during the
// stream callback.
class BodyWriter {
 public:
  virtual ~BodyWriter() = default;
  // Sends `data` as one chunk (an empty `data` sends nothing). False once the client is gone: the
  // connection failed or was closed, the client read nothing for the idle timeout, or the server
  // is stopping. After a false every further call is false.
  virtual bool Write(std::string_view data) = 0;
  // Whether the client is still there, without writing: false once it closed the connection
  // (also when it only closed its sending side) or reset it, or the server is stopping. After a
  // false every further call of either function is false.
  virtual bool Connected() = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Sent as given; a name may repeat (each pair is one header line).
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, `body` is ignored: after the status line and headers are sent, the handler thread
  // calls `stream`, which writes the body in pieces. HTTP/1.1: chunked transfer encoding,
  // keep-alive as requested; HTTP/1.0: the raw bytes, then the connection closes. `stream`
  // returns false to abort the body: the connection is closed without the terminating chunk, so
  // the client sees an incomplete response (for failures after the headers went out).
  std::function<bool(BodyWriter&)> stream;
};

// A JSON error response: {"error": message, "status": code}.
Response JsonError(int status, std::string_view message);

using Handler = std::function<Response(const Request&)>;
// Called with a request whose header is complete and whose body has not been read (`body` is
// empty): a response refuses the request without reading its body (the connection is closed
// after the answer), nullopt lets the server read the body and call the Handler. How a server
// checks credentials before accepting up to max_body_bytes from a stranger. Called concurrently,
// on an I/O thread: it must not block (checking tokens in memory is fine; a lookup that waits on
// disk or network would stall every connection of that thread).
using Admit = std::function<std::optional<Response>(const Request&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: pick a free port (see Server::port())
  size_t max_body_bytes = 32u << 20;
  // I/O threads: run every connection's reads, writes and deadlines (at least 1).
  int io_threads = 2;
  // Most handlers running at once; threads are started on demand and end after 30 s idle.
  // Complete requests beyond it wait in a queue (their connections stay open).
  int handler_threads = 256;
  // Open connections in all, and from one client address: beyond either a new connection gets
  // 503 with `Retry-After: 1` and a JSON error, then is closed (nothing of it is read).
  int max_connections = 10000;
  int max_connections_per_address = 1000;
  // The whole header of a request must arrive within this, counted from its first byte (408 and
  // close otherwise); on TLS it also bounds the handshake.
  std::chrono::milliseconds header_timeout{10000};
  // The body must arrive at this average rate, after a grace of one header_timeout from the end
  // of the header (408 and close otherwise). 0: no rate, each read is bounded by idle_timeout.
  uint64_t body_min_bytes_per_second = 1024;
  // An idle keep-alive connection (no byte of a next request) is closed after this; also how
  // long a client may read nothing of an answer before the write fails.
  std::chrono::milliseconds idle_timeout{60000};
  Admit admit;  // empty: every request is read whole
  // PEM files: when both are set the listener speaks only HTTPS (TLS 1.2 and newer); Start()
  // fails naming the file when one cannot be loaded, and when only one of them is set.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  // Binds and starts accepting; error when the address cannot be bound.
  Status Start();
  uint16_t port() const { return port_; }
  // Connections open now (counted against max_connections; refused ones are not). Thread-safe.
  int open_connections() const;
  // Since Start(), over all connections, for tests. Thread-safe.
  struct Counters {
    // Deadline timer waits started: one when a deadline comes earlier than the one already
    // waited for, not one per read or write.
    uint64_t timer_waits = 0;
    uint64_t body_reads = 0;  // reads of request bodies (each a system call or more)
  };
  Counters counters() const;
  // Stops accepting, shuts connections down, waits (bounded, 10 s) for running handlers, joins
  // the I/O threads. Idempotent. The destructor also waits for handler threads still running.
  void Stop();
  // The graceful part of a shutdown, before Stop(): stops accepting, closes the connections that
  // wait for a request, and lets those reading or answering one finish it (the answer says
  // Connection: close; pipelined requests after it are not read). Returns when no connection is
  // left or at `deadline`; Stop() then ends whatever is left. Call from one thread, before Stop().
  void StopGracefully(std::chrono::steady_clock::time_point deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// Sets *gone once the client of `request` is no longer connected (Request::client_connected),
// asked every `every` on a thread of its own, so a handler doing long work (a query) can stop it
// for a client that left. Does nothing for a request without client_connected. Owned by the
// handler, which must destroy it before it returns; destruction stops the thread at once.
class DisconnectWatch {
 public:
  DisconnectWatch(const Request& request, std::atomic<bool>* gone,
                  std::chrono::milliseconds every = std::chrono::milliseconds(100));
  ~DisconnectWatch();
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

 private:
  std::optional<BackgroundLoop> loop_;  // watching; its destructor stops and joins it
};

// Percent-decoding of URL components ('+' as space when form is true).
std::string UrlDecode(std::string_view s, bool form);

}  // namespace sediment::http
