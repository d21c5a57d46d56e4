#include "http/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include <poll.h>
#include <sys/socket.h>
#include <zlib.h>

#include "common/json_writer.h"
#include "http/http_client.h"

namespace sediment::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  }
  return {};
}

Response JsonError(int status, std::string_view message) {
  JsonWriter w;
  w.BeginObject().Key("error").String(message).Key("status").Int(status).EndObject();
  Response r;
  r.status = status;
  r.body = w.Take();
  return r;
}

DisconnectWatch::DisconnectWatch(const Request& request, std::atomic<bool>* gone,
                                 std::chrono::milliseconds every) {
  if (!request.client_connected) return;
  loop_.emplace("http-disconnect", BackgroundLoop::Options{.interval = every},
                [this, connected = request.client_connected, gone] {
                  if (connected()) return;
                  gone->store(true);
                  loop_->Stop();  // from the pass: no further pass; the destructor joins
                });
  (void)loop_->Start();
}

DisconnectWatch::~DisconnectWatch() = default;

std::string UrlDecode(std::string_view s, bool form) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (form && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Decodes a gzip or zlib/deflate body in place. 400 for a corrupt stream, 413 when the decoded
// body exceeds `limit`. Returns 0 on success, else the HTTP status to answer.
int InflateBody(std::string* body, bool gzip, size_t limit, std::string* error) {
  z_stream zs{};
  if (inflateInit2(&zs, gzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) {
    *error = "cannot initialise decompression";
    return 500;
  }
  std::string out;
  out.resize(std::min<size_t>(std::max<size_t>(body->size() * 4, 4096), limit + 1));
  zs.next_in = reinterpret_cast<Bytef*>(body->data());
  zs.avail_in = static_cast<uInt>(body->size());
  int rc = Z_OK;
  size_t produced = 0;
  while (true) {
    if (produced == out.size()) {
      if (out.size() > limit) break;
      out.resize(std::min(out.size() * 2, limit + 1));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(out.size() - produced);
    rc = inflate(&zs, Z_NO_FLUSH);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members (as `cat a.gz b.gz` makes) continue with the next member.
      if (gzip && zs.avail_in > 0) {
        inflateReset(&zs);
        continue;
      }
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // truncated stream
  }
  inflateEnd(&zs);
  if (produced > limit) {
    *error =
        "decompressed request body is larger than the limit of " + std::to_string(limit) + " bytes";
    return 413;
  }
  if (rc != Z_STREAM_END) {
    *error = std::string("request body is not valid ") + (gzip ? "gzip" : "deflate") + " data";
    return 400;
  }
  out.resize(produced);
  *body = std::move(out);
  return 0;
}

// A header value on one line: CR and LF become spaces (no header injection from handler text).
std::string OneLine(std::string_view v) {
  std::string out(v);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

// Sends all of `data` on the blocking socket `fd`. False on an error, when the peer closed, or
// when not a byte could be sent for `timeout_ms` (a client that stopped reading).
bool SendAll(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return false;
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Whether the peer of `fd` is still connected (see BodyWriter::Connected).
bool PeerConnected(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int r = ::poll(&p, 1, 0);
  if (r < 0) return errno == EINTR;
  if (r == 0) return true;
  if ((p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0) return false;
  if ((p.revents & POLLIN) != 0) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
  return true;
}

// While a handler runs for a client that sent kProgressIntervalHeader (HTTP/1.1 only): sends
// "102 Processing" interim answers on the connection every that many milliseconds (at least 50),
// so the client can tell a server that works on its answer from one that froze. Only this thread
// writes to the socket until the destructor returned (it stops and joins the thread); a send that
// fails ends the ticking (the final answer's write then fails too).
class ProgressTicker {
 public:
  ProgressTicker(int fd, std::string_view interval_ms, unsigned version,
                 const std::atomic<bool>* stopping) {
    if (version < 11 || interval_ms.empty()) return;
    int64_t ms = 0;
    for (char c : interval_ms) {
      if (c < '0' || c > '9' || ms > 3600000) return;
      ms = ms * 10 + (c - '0');
    }
    const auto every = std::chrono::milliseconds(std::max<int64_t>(ms, 50));
    loop_.emplace("http-progress", BackgroundLoop::Options{.interval = every},
                  [this, fd, stopping] {
                    static constexpr std::string_view kInterim = "HTTP/1.1 102 Processing\r\n\r\n";
                    if (stopping->load() || !SendAll(fd, kInterim, 1000)) loop_->Stop();
                  });
    (void)loop_->Start();
  }
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  std::optional<BackgroundLoop> loop_;  // ticking; its destructor stops and joins it
};

class SocketBodyWriter : public BodyWriter {
 public:
  SocketBodyWriter(int fd, bool chunked, int timeout_ms, const std::atomic<bool>* stopping)
      : fd_(fd), chunked_(chunked), timeout_ms_(timeout_ms), stopping_(stopping) {}

  bool Write(std::string_view data) override {
    if (failed_ || stopping_->load()) {
      failed_ = true;
      return false;
    }
    if (data.empty()) return true;
    bool ok;
    if (chunked_) {
      char size[24];
      int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      std::string frame;
      frame.reserve(static_cast<size_t>(n) + data.size() + 2);
      frame.append(size, static_cast<size_t>(n));
      frame.append(data);
      frame.append("\r\n");
      ok = SendAll(fd_, frame, timeout_ms_);
    } else {
      ok = SendAll(fd_, data, timeout_ms_);
    }
    if (!ok) failed_ = true;
    return ok;
  }

  bool Connected() override {
    if (failed_ || stopping_->load() || !PeerConnected(fd_)) failed_ = true;
    return !failed_;
  }

  bool failed() const { return failed_; }

 private:
  int fd_;
  bool chunked_;
  int timeout_ms_;
  const std::atomic<bool>* stopping_;
  bool failed_ = false;
};

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  net::io_context ioc{1};
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread accept_thread;
  std::mutex mu;
  std::condition_variable cv;
  std::list<std::shared_ptr<tcp::socket>> sockets;  // open connections, for Stop()
  int active = 0;
  std::atomic<bool> stopping{false};

  void AcceptLoop();
  void Serve(std::shared_ptr<tcp::socket> sock);
  // Sends the status line and headers of `resp`, then runs its stream callback. False when the
  // connection must close (the client is gone, the producer aborted, or no keep-alive).
  bool WriteStreamed(tcp::socket& sock, Response& resp, unsigned version, bool keep_alive);
};

bool Server::Impl::WriteStreamed(tcp::socket& sock, Response& resp, unsigned version,
                                 bool keep_alive) {
  const bool chunked = version >= 11;
  if (!chunked) keep_alive = false;
  const auto status = static_cast<bhttp::status>(resp.status);
  std::string head = std::string(version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ") +
                     std::to_string(resp.status) + " " +
                     std::string(bhttp::obsolete_reason(status)) + "\r\n";
  head += "Server: sediment\r\nContent-Type: " + OneLine(resp.content_type) + "\r\n";
  for (const auto& [k, v] : resp.headers) head += OneLine(k) + ": " + OneLine(v) + "\r\n";
  if (chunked) head += "Transfer-Encoding: chunked\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  head += "\r\n";
  const int fd = sock.native_handle();
  const int timeout_ms = options.idle_timeout_seconds * 1000;
  if (!SendAll(fd, head, timeout_ms)) return false;
  SocketBodyWriter writer(fd, chunked, timeout_ms, &stopping);
  bool completed = false;
  try {
    completed = resp.stream(writer);
  } catch (const std::exception& e) {
    spdlog::error("http stream producer threw: {}", e.what());
  }
  if (!completed || writer.failed()) return false;
  if (chunked && !SendAll(fd, "0\r\n\r\n", timeout_ms)) return false;
  return keep_alive;
}

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
}

Server::~Server() { Stop(); }

Status Server::Start() {
  if (!impl_->options.tls_cert_file.empty() || !impl_->options.tls_key_file.empty()) {
    return Status::InvalidArgument("TLS is not available in this build of the HTTP server");
  }
  beast::error_code ec;
  auto addr = net::ip::make_address(impl_->options.host, ec);
  if (ec) return Status::InvalidArgument("bad listen address '" + impl_->options.host + "'");
  tcp::endpoint ep(addr, impl_->options.port);
  impl_->acceptor = std::make_unique<tcp::acceptor>(impl_->ioc);
  impl_->acceptor->open(ep.protocol(), ec);
  if (!ec) impl_->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor->bind(ep, ec);
  if (!ec) impl_->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError("cannot listen on " + impl_->options.host + ":" +
                           std::to_string(impl_->options.port) + ": " + ec.message());
  }
  port_ = impl_->acceptor->local_endpoint().port();
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  return Status::OK();
}

void Server::Stop() {
  if (!impl_ || !impl_->acceptor) return;
  if (impl_->stopping.exchange(true)) return;
  beast::error_code ec;
  // Wake the accept thread with a connection to ourselves; the acceptor object is only touched by
  // that thread until it has exited (asio objects are not thread-safe).
  {
    std::string host = impl_->options.host;
    if (host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    net::io_context ioc;
    tcp::socket s(ioc);
    auto addr = net::ip::make_address(host, ec);
    if (!ec) s.connect(tcp::endpoint(addr, port_), ec);
  }
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  impl_->acceptor->close(ec);
  std::unique_lock lock(impl_->mu);
  // Unblock connection threads at the OS level; each thread still owns its socket object.
  for (auto& s : impl_->sockets) ::shutdown(s->native_handle(), SHUT_RDWR);
  impl_->cv.wait_for(lock, std::chrono::seconds(10), [this] { return impl_->active == 0; });
}

void Server::Impl::AcceptLoop() {
  while (!stopping) {
    auto sock = std::make_shared<tcp::socket>(ioc);
    beast::error_code ec;
    acceptor->accept(*sock, ec);
    if (stopping) break;
    if (ec) {
      spdlog::warn("http accept: {}", ec.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::unique_lock lock(mu);
    if (active >= options.max_connections) {
      lock.unlock();
      Response r = JsonError(503, "too many connections");
      bhttp::response<bhttp::string_body> res{bhttp::status::service_unavailable, 11};
      res.set(bhttp::field::content_type, r.content_type);
      res.set(bhttp::field::retry_after, "1");
      res.body() = r.body;
      res.prepare_payload();
      bhttp::write(*sock, res, ec);
      sock->shutdown(tcp::socket::shutdown_both, ec);
      continue;
    }
    ++active;
    sockets.push_back(sock);
    auto it = std::prev(sockets.end());
    lock.unlock();
    std::thread([this, sock, it] {
      Serve(sock);
      std::lock_guard g(mu);
      beast::error_code ec;
      sock->close(ec);
      sockets.erase(it);
      --active;
      cv.notify_all();
    }).detach();
  }
}

// The request's method, path, query and headers (no body).
Request RequestFromHeader(const bhttp::request<bhttp::string_body>& msg,
                          const std::string& remote) {
  Request req;
  req.method = std::string(msg.method_string());
  std::string_view target(msg.target().data(), msg.target().size());
  auto q = target.find('?');
  req.path = UrlDecode(target.substr(0, q), false);
  if (q != std::string_view::npos) {
    std::string_view qs = target.substr(q + 1);
    while (!qs.empty()) {
      auto amp = qs.find('&');
      std::string_view kv = qs.substr(0, amp);
      auto eq = kv.find('=');
      std::string k = UrlDecode(kv.substr(0, eq), true);
      std::string v = eq == std::string_view::npos ? "" : UrlDecode(kv.substr(eq + 1), true);
      if (!k.empty()) req.query[k] = v;
      if (amp == std::string_view::npos) break;
      qs.remove_prefix(amp + 1);
    }
  }
  for (const auto& h : msg) {
    req.headers.emplace_back(std::string(h.name_string()), std::string(h.value()));
  }
  req.remote = remote;
  return req;
}

void Server::Impl::Serve(std::shared_ptr<tcp::socket> sock) {
  beast::error_code ec;
  beast::flat_buffer buffer;
  // Idle connections are closed after the timeout (SO_RCVTIMEO on the blocking socket).
  struct timeval tv {
    options.idle_timeout_seconds, 0
  };
  ::setsockopt(sock->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string remote;
  {
    auto ep = sock->remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  while (!stopping) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    parser.header_limit(64 * 1024);
    bhttp::read_header(*sock, buffer, parser, ec);
    std::optional<Response> refused;
    if (!ec) {
      auto len = parser.content_length();
      if (len && *len > options.max_body_bytes) {
        ec = bhttp::error::body_limit;
      } else if (options.admit &&
                 (refused = options.admit(RequestFromHeader(parser.get(), remote)))) {
        // Answered from the header alone: the body stays unread.
      } else {
        bhttp::read(*sock, buffer, parser, ec);
      }
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      break;
    }
    Response resp;
    bool keep_alive = true;
    unsigned version = 11;
    if (refused) {
      resp = std::move(*refused);
      version = parser.get().version();
      keep_alive = false;  // the body is unread
    } else if (ec == bhttp::error::body_limit) {
      resp = JsonError(413, "request body is larger than the limit of " +
                                std::to_string(options.max_body_bytes) + " bytes");
      keep_alive = false;  // the rest of the body is unread
    } else if (ec) {
      if (ec == net::error::would_block || ec == net::error::timed_out ||
          ec == net::error::try_again)
        break;
      if (!parser.is_header_done()) {
        // Garbage or a half-sent request: answer if we can, then close.
        resp = JsonError(400, "malformed HTTP request: " + ec.message());
      } else {
        resp = JsonError(400, "malformed HTTP request body: " + ec.message());
      }
      keep_alive = false;
    } else {
      auto& msg = parser.get();
      version = msg.version();
      keep_alive = msg.keep_alive();
      Request req = RequestFromHeader(msg, remote);
      req.body = std::move(msg.body());
      std::string encoding(req.Header("Content-Encoding"));
      for (auto& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      int decode_status = 0;
      std::string decode_error;
      if (encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate") {
        decode_status =
            InflateBody(&req.body, encoding != "deflate", options.max_body_bytes, &decode_error);
      } else if (!encoding.empty() && encoding != "identity") {
        decode_status = 415;
        decode_error =
            "unsupported Content-Encoding '" + encoding + "' (use gzip, deflate or none)";
      }
      if (decode_status != 0) {
        resp = JsonError(decode_status, decode_error);
      } else {
        req.client_connected = [fd = sock->native_handle(), stopping = &stopping] {
          return !stopping->load() && PeerConnected(fd);
        };
        try {
          ProgressTicker ticker(sock->native_handle(), req.Header(kProgressIntervalHeader), version,
                                &stopping);
          resp = handler(req);
        } catch (const std::exception& e) {
          spdlog::error("http handler for {} {} threw: {}", req.method, req.path, e.what());
          resp = JsonError(500, std::string("internal error: ") + e.what());
        }
      }
    }
    if (resp.stream) {
      if (!WriteStreamed(*sock, resp, version, keep_alive)) break;
      continue;
    }
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(resp.status), version};
    res.set(bhttp::field::server, "sediment");
    // 1xx, 204 and 304 answers have no body and no Content-Length / Content-Type (RFC 9110).
    const bool bodiless = resp.status < 200 || resp.status == 204 || resp.status == 304;
    if (!bodiless) res.set(bhttp::field::content_type, OneLine(resp.content_type));
    // insert, not set: a header may repeat (one X-Sediment-Warning per warning).
    for (const auto& [k, v] : resp.headers) res.insert(k, OneLine(v));
    res.keep_alive(keep_alive);
    if (!bodiless) {
      res.body() = std::move(resp.body);
      res.prepare_payload();
    }
    bhttp::write(*sock, res, ec);
    if (ec) break;
    if (!keep_alive) {
      // Let the client finish sending (bounded) so it sees the response instead of a reset.
      sock->shutdown(tcp::socket::shutdown_send, ec);
      struct timeval drain {
        2, 0
      };
      ::setsockopt(sock->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &drain, sizeof drain);
      char sink[65536];
      size_t drained = 0;
      while (drained < (256u << 20)) {
        size_t n = sock->read_some(net::buffer(sink), ec);
        if (ec || n == 0) break;
        drained += n;
      }
      break;
    }
  }
  sock->shutdown(tcp::socket::shutdown_both, ec);
  // The socket is closed by the caller under `mu`, where Stop() reads its native handle.
}

}  // namespace sediment::http
