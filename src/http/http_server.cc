#include "http/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <future>
#include <list>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zlib.h>

#include "common/env.h"
#include "common/json_writer.h"
#include "common/mutex.h"
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

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using PlainStream = tcp::socket;
using TlsStream = net::ssl::stream<tcp::socket>;

// How long a connection that is closed after its answer is drained of what the client still
// sends (so it reads the answer instead of a reset), and at most how much.
constexpr milliseconds kDrainTime{2000};
constexpr milliseconds kRejectDrainTime{500};
constexpr size_t kDrainBytes = 64u << 20;
// Most bytes handed to one write: a deadline bounds each piece, not the whole answer.
constexpr size_t kWritePiece = 256u << 10;
// Room made in a connection's buffer for reading a body. Beast reads into the buffer's free
// space, at least 512 bytes and at most 64 KiB a read; without room a body arrives 512 bytes per
// system call.
constexpr size_t kBodyReadRoom = 64u << 10;
// How long an interim answer (102 Processing) may take to be sent.
constexpr milliseconds kInterimSendTimeout{1000};
// A handler thread with nothing to do for this long ends.
constexpr milliseconds kHandlerIdle{30000};

// Runs tasks on at most `max_threads` threads, started on demand (one per queued task no idle
// thread can take) and ended after kHandlerIdle without work. Thread-safe.
class HandlerPool {
 public:
  explicit HandlerPool(int max_threads) : max_threads_(std::max(1, max_threads)) {}
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;
  ~HandlerPool() { WaitEnded(std::nullopt); }

  void Submit(std::function<void()> task) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
    if (static_cast<int>(queue_.size()) > idle_ && threads_ < max_threads_) {
      ++threads_;
      std::thread([this] { Run(); }).detach();
    } else {
      cv_.NotifyOne();
    }
  }
  // No task is taken after the queue ran empty: idle threads end at once.
  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
    cv_.NotifyAll();
  }
  // Waits until every thread ended (after Close()), at most `timeout` when given; true when
  // they all did.
  bool WaitEnded(std::optional<milliseconds> timeout) {
    const auto until = Clock::now() + timeout.value_or(milliseconds(0));
    MutexLock lock(&mu_);
    while (threads_ > 0) {
      if (timeout && !ended_.WaitUntil(mu_, until) && Clock::now() >= until) break;
      if (!timeout) ended_.Wait(mu_);
    }
    return threads_ == 0;
  }
  int threads() {
    MutexLock lock(&mu_);
    return threads_;
  }

 private:
  void Run() {
    MutexLock lock(&mu_);
    while (true) {
      bool timed_out = false;
      while (queue_.empty() && !closed_ && !timed_out) {
        ++idle_;
        timed_out = !cv_.WaitFor(mu_, kHandlerIdle);
        --idle_;
      }
      if (queue_.empty()) break;  // idle for kHandlerIdle, or closed
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.Unlock();
      task();
      task = nullptr;  // drops what the task holds (a connection) outside the lock
      lock.Lock();
    }
    --threads_;
    ended_.NotifyAll();  // under mu_: the pool outlives this notification
  }

  const int max_threads_;
  Mutex mu_;
  CondVar cv_;     // a task was queued, or Close()
  CondVar ended_;  // a thread ended
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  int threads_ GUARDED_BY(mu_) = 0;
  int idle_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
};

// The part of a connection Server::Stop() and the registry see.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Shuts the connection down (from any thread): every pending and later operation fails.
  virtual void PostStop() = 0;
  // Closes the connection if it waits for a request (from any thread); a connection reading or
  // answering one finishes it (its answer says Connection: close) and closes then.
  virtual void PostCloseIfIdle() = 0;
};

// Raises RLIMIT_NOFILE to its hard limit; logs when that is below what `max_connections` needs.
void RaiseFileLimit(int max_connections) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  // Besides the connections: data files, peers, the listener.
  const rlim_t needed = static_cast<rlim_t>(max_connections) + 256;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < needed) {
    spdlog::warn(
        "http: open file limit is {} (hard limit {}), below the {} that --max-connections {} "
        "needs: connections beyond it fail to be accepted",
        rl.rlim_cur, rl.rlim_max, needed, max_connections);
  }
}

// The text of a TLS error: OpenSSL's reason ("no such file", "no start line") when it has one.
std::string TlsErrorText(const beast::error_code& ec) {
  if (ec.category() == net::error::get_ssl_category()) {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (reason != nullptr) return reason;
  }
  return ec.message();
}

bool IsClosedByPeer(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::ssl::error::stream_truncated;
}

class ServerState {
 public:
  ServerOptions options;
  Handler handler;
  std::atomic<bool> stopping{false};
  // StopGracefully began: no new connection or request; the requests in progress are answered.
  std::atomic<bool> draining{false};
  std::atomic<bool> io_stopped{false};  // the I/O threads ended: nothing posted runs any more
  struct {
    std::atomic<uint64_t> timer_waits{0};
    std::atomic<uint64_t> body_reads{0};
  } counters;  // Server::counters()
  bool started = false;
  std::unique_ptr<net::ssl::context> tls;  // set when the listener speaks TLS

  Mutex mu;
  CondVar sessions_changed;
  int open GUARDED_BY(mu) = 0;  // admitted connections
  std::unordered_map<std::string, int> per_address GUARDED_BY(mu);
  std::list<std::weak_ptr<SessionBase>> sessions GUARDED_BY(mu);  // every live connection

  HandlerPool pool;
  std::vector<std::thread> io_threads;
  // Destroyed before the members above (its pending operations hold connections, whose
  // destructors use the registry and the TLS context).
  net::io_context ioc;
  // Keeps the I/O threads running while connections wait for their handlers (no operation
  // pending) until Stop() is done waiting for them.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;          // on its own strand
  std::optional<net::steady_timer> accept_retry;  // after a failed accept (out of files)

  ServerState(ServerOptions o, Handler h)
      : options(std::move(o)), handler(std::move(h)), pool(options.handler_threads) {}
  ~ServerState() {
    pool.Close();
    pool.WaitEnded(std::nullopt);
  }

  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  // Registers a connection; returns its registry position.
  std::list<std::weak_ptr<SessionBase>>::iterator Register(std::weak_ptr<SessionBase> s) {
    MutexLock lock(&mu);
    sessions.push_back(std::move(s));
    return std::prev(sessions.end());
  }
  // Forgets a connection (its destructor); `address` is set when it was admitted.
  void Unregister(std::list<std::weak_ptr<SessionBase>>::iterator it,
                  const std::optional<std::string>& address) {
    MutexLock lock(&mu);
    sessions.erase(it);
    if (address) {
      --open;
      auto a = per_address.find(*address);
      if (a != per_address.end() && --a->second <= 0) per_address.erase(a);
    }
    sessions_changed.NotifyAll();
  }
  // Closes the listening socket (on its strand): no new connection is accepted.
  // Closes the listening socket on its executor and waits (at most 5 s) until it is closed, so
  // that a connection attempted after this returns is refused. Never called on an I/O thread.
  void CloseAcceptor() {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> closed = done->get_future();
    net::post(acceptor->get_executor(), [this, done] {
      beast::error_code ec;
      acceptor->close(ec);
      accept_retry->cancel();
      done->set_value();
    });
    closed.wait_for(std::chrono::seconds(5));
  }
  // The connections alive now. Drop the result outside `mu`: the last reference runs a
  // session's destructor, which takes it.
  std::vector<std::shared_ptr<SessionBase>> LiveSessions() {
    std::vector<std::shared_ptr<SessionBase>> live;
    MutexLock lock(&mu);
    for (auto& w : sessions) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
    return live;
  }
};

// One connection: a chain of asynchronous operations on the connection's strand (an I/O
// thread at a time), the handler on a handler thread. Stream is PlainStream or TlsStream.
//
// The chain: [TLS handshake] → wait for a request's first byte (idle_timeout) → header
// (header_timeout) → admit / 413 / 100-continue → body (rate deadline) → handler thread →
// answer → next request or drain and close. One deadline timer at a time: when it fires it
// cancels the socket's operations (never closes the socket: a handler thread may be polling its
// descriptor) and the failed operation answers 408 or closes.
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  template <class... Args>
  Session(ServerState* server, std::string address, std::string remote, bool admitted,
          Args&&... args)
      : server_(server),
        stream_(std::forward<Args>(args)...),
        timer_(stream_.get_executor()),
        remote_(std::move(remote)),
        fd_(Socket().native_handle()) {
    if (admitted) address_ = std::move(address);
  }
  ~Session() override { server_->Unregister(registry_it_, address_); }

  // Registers the connection and starts its chain; `admitted` false: answers 503 and closes.
  void Start() {
    registry_it_ = server_->Register(this->weak_from_this());
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      // Accepted while Stop() began: it may have listed the connections before this one.
      if (self->server_->stopping) return self->Close();
      if constexpr (kTls) {
        self->ArmDeadline(Clock::now() + self->server_->options.header_timeout);
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
          self->CancelDeadline();
          if (ec || self->timed_out_) return self->Close();
          self->Begin();
        });
      } else {
        self->Begin();
      }
    });
  }

  void PostStop() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      beast::error_code ec;
      self->Socket().cancel(ec);
      self->Socket().shutdown(tcp::socket::shutdown_both, ec);
    });
  }

  void PostCloseIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      beast::error_code ec;
      if (self->idle_) self->Socket().cancel(ec);  // the wait for a first byte ends: Close()
    });
  }

 private:
  using Parser = bhttp::request_parser<bhttp::string_body>;

  tcp::socket& Socket() { return beast::get_lowest_layer(stream_); }

  void Begin() {
    if (!address_) {
      Response r = JsonError(503, "too many connections");
      r.headers.emplace_back("Retry-After", "1");
      return SendResponse(std::move(r), 11, false, kRejectDrainTime);
    }
    ReadRequest();
  }

  // --- deadlines (on the strand) ---
  // The deadline lives in deadline_; the timer is only ever moved earlier. A later deadline (the
  // body's rate deadline grows with every piece read; the next request's idle deadline follows
  // the answer) leaves the armed wait as it is, and that wait, firing early, waits again for the
  // deadline then current. So reading a body a piece at a time costs no timer call per piece.
  // The wait holds only a weak reference: the operation the deadline bounds keeps the session.
  void ArmDeadline(Clock::time_point at) {
    timed_out_ = false;
    deadline_ = at;
    deadline_armed_ = true;
    if (!timer_waiting_ || at < timer_at_) WaitUntil(at);
  }
  void CancelDeadline() { deadline_armed_ = false; }
  void WaitUntil(Clock::time_point at) {
    server_->counters.timer_waits.fetch_add(1, std::memory_order_relaxed);
    const uint64_t gen = ++timer_gen_;
    timer_at_ = at;
    timer_waiting_ = true;
    timer_.expires_at(at);  // a wait still pending ends with operation_aborted (stale gen)
    timer_.async_wait([weak = this->weak_from_this(), gen](beast::error_code ec) {
      auto self = weak.lock();
      if (!self || gen != self->timer_gen_) return;
      self->timer_waiting_ = false;
      if (ec || !self->deadline_armed_) return;
      if (Clock::now() < self->deadline_) return self->WaitUntil(self->deadline_);
      self->timed_out_ = true;
      beast::error_code ignored;
      self->Socket().cancel(ignored);
    });
  }

  // --- reading a request (on the strand) ---
  void ReadRequest() {
    if (server_->stopping || server_->draining) return Close();
    parser_.emplace();
    parser_->header_limit(64 * 1024);
    parser_->body_limit(server_->options.max_body_bytes);
    if (buffer_.size() > 0) return ReadHeader();  // pipelined: the next request began
    // Idle: no buffer while waiting (an idle connection costs its socket and this object).
    buffer_.shrink_to_fit();
    ArmDeadline(Clock::now() + server_->options.idle_timeout);
    idle_ = true;
    auto on_first = [self = this->shared_from_this()](beast::error_code ec) {
      self->idle_ = false;
      self->CancelDeadline();
      if (ec || self->server_->stopping) return self->Close();
      self->ReadHeader();
    };
    if constexpr (kTls) {
      // TLS has to decrypt to tell whether a byte of the request came.
      stream_.async_read_some(buffer_.prepare(1024), [self = this->shared_from_this(), on_first](
                                                         beast::error_code ec, size_t n) {
        self->buffer_.commit(n);
        if (!ec && n == 0) ec = net::error::eof;
        on_first(ec);
      });
    } else {
      Socket().async_wait(tcp::socket::wait_read, on_first);
    }
  }

  void ReadHeader() {
    ArmDeadline(Clock::now() + server_->options.header_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->CancelDeadline();
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    const auto& o = server_->options;
    if (timed_out_) {
      return SendResponse(JsonError(408, "the request header did not arrive within " +
                                             std::to_string(o.header_timeout.count()) + " ms"),
                          11, false, kDrainTime);
    }
    if (ec == bhttp::error::body_limit) return SendResponse(TooLarge(), 11, false, kDrainTime);
    if (ec) {
      if (IsClosedByPeer(ec) && buffer_.size() == 0 && !parser_->got_some()) return Close();
      if (server_->stopping) return Close();
      return SendResponse(JsonError(400, "malformed HTTP request: " + ec.message()), 11, false,
                          kDrainTime);
    }
    const unsigned version = parser_->get().version();
    if (auto len = parser_->content_length(); len && *len > o.max_body_bytes) {
      return SendResponse(TooLarge(), version, false, kDrainTime);
    }
    if (o.admit) {
      std::optional<Response> refused;
      try {
        refused = o.admit(RequestFromHeader(parser_->get(), remote_));
      } catch (const std::exception& e) {
        spdlog::error("http admit threw: {}", e.what());
        refused = JsonError(500, std::string("internal error: ") + e.what());
      }
      // Answered from the header alone: the body stays unread, the connection closes.
      if (refused) return SendResponse(std::move(*refused), version, false, kDrainTime);
    }
    if (parser_->is_done()) return Dispatch();
    // Until the next idle wait, which gives the room back (ReadRequest).
    buffer_.reserve(buffer_.size() +
                    static_cast<size_t>(std::min<uint64_t>(
                        parser_->content_length().value_or(kBodyReadRoom), kBodyReadRoom)));
    body_start_ = Clock::now();
    body_bytes_ = 0;
    const auto expect = parser_->get()[bhttp::field::expect];
    if (version >= 11 && beast::iequals(expect, "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      WriteAll(kContinue, 0, o.idle_timeout, [self = this->shared_from_this()](bool ok) {
        if (!ok) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    const auto& o = server_->options;
    if (o.body_min_bytes_per_second == 0) {
      ArmDeadline(Clock::now() + o.idle_timeout);
    } else {
      // Having `body_bytes_`, the next byte is due by the time the minimum rate allows for them
      // after the grace.
      const auto allowed = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(static_cast<double>(body_bytes_ + 1) /
                                        static_cast<double>(o.body_min_bytes_per_second)));
      ArmDeadline(body_start_ + o.header_timeout + allowed);
    }
    server_->counters.body_reads.fetch_add(1, std::memory_order_relaxed);
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                             self->CancelDeadline();
                             self->OnBody(ec, n);
                           });
  }

  void OnBody(beast::error_code ec, size_t n) {
    const unsigned version = parser_->get().version();
    body_bytes_ += n;
    if (timed_out_) {
      return SendResponse(
          JsonError(408, "the request body arrived slower than " +
                             std::to_string(server_->options.body_min_bytes_per_second) +
                             " bytes per second"),
          version, false, kDrainTime);
    }
    if (ec == bhttp::error::body_limit) {
      return SendResponse(TooLarge(), version, false, kDrainTime);
    }
    if (ec) {
      if (IsClosedByPeer(ec) || server_->stopping) return Close();
      return SendResponse(JsonError(400, "malformed HTTP request body: " + ec.message()), version,
                          false, kDrainTime);
    }
    if (!parser_->is_done()) return ReadBody();
    Dispatch();
  }

  Response TooLarge() const {
    return JsonError(413, "request body is larger than the limit of " +
                              std::to_string(server_->options.max_body_bytes) + " bytes");
  }

  // --- the handler (on a handler thread) ---
  void Dispatch() {
    auto msg = std::make_shared<bhttp::request<bhttp::string_body>>(parser_->release());
    parser_.reset();
    server_->pool.Submit([self = this->shared_from_this(), msg] { self->RunHandler(*msg); });
  }

  void RunHandler(bhttp::request<bhttp::string_body>& msg) {
    const unsigned version = msg.version();
    const bool keep_alive = msg.keep_alive();
    Request req = RequestFromHeader(msg, remote_);
    req.body = std::move(msg.body());
    std::string encoding(req.Header("Content-Encoding"));
    for (auto& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    int decode_status = 0;
    std::string decode_error;
    if (encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate") {
      decode_status = InflateBody(&req.body, encoding != "deflate", server_->options.max_body_bytes,
                                  &decode_error);
    } else if (!encoding.empty() && encoding != "identity") {
      decode_status = 415;
      decode_error = "unsupported Content-Encoding '" + encoding + "' (use gzip, deflate or none)";
    }
    Response resp;
    if (decode_status != 0) {
      resp = JsonError(decode_status, decode_error);
    } else {
      req.client_connected = [weak = this->weak_from_this()] {
        auto self = weak.lock();
        return self && self->Connected();
      };
      try {
        ProgressTicker ticker(this, req.Header(kProgressIntervalHeader), version);
        resp = server_->handler(req);
      } catch (const std::exception& e) {
        spdlog::error("http handler for {} {} threw: {}", req.method, req.path, e.what());
        resp = JsonError(500, std::string("internal error: ") + e.what());
      }
    }
    auto self = this->shared_from_this();
    if (resp.stream) {
      const bool keep = WriteStreamed(resp, version, keep_alive);
      net::post(stream_.get_executor(), [self, keep] {
        if (keep) return self->ReadRequest();
        self->Close();
      });
      return;
    }
    net::post(stream_.get_executor(),
              [self, resp = std::move(resp), version, keep_alive]() mutable {
                self->SendResponse(std::move(resp), version, keep_alive, kDrainTime);
              });
  }

  // Sends the status line and headers of `resp`, then runs its stream callback (on the handler
  // thread). False when the connection must close (the client is gone, the producer aborted, or
  // no keep-alive).
  bool WriteStreamed(Response& resp, unsigned version, bool keep_alive);

  // Whether the client is still there (BodyWriter::Connected); any thread.
  bool Connected() {
    if (failed_ || closed_ || server_->stopping || !PeerConnected(fd_)) failed_ = true;
    return !failed_;
  }

  // Writes `data` (kept alive by the caller until `done`) from `offset` on, a piece at a time;
  // each piece must go out within `timeout` (a client that reads slowly but steadily is served,
  // one that stopped reading is not). `done(false)` when it could not. On the strand.
  void WriteAll(std::string_view data, size_t offset, milliseconds timeout,
                std::function<void(bool)> done) {
    ArmDeadline(Clock::now() + timeout);
    stream_.async_write_some(net::buffer(data.data() + offset, data.size() - offset),
                             [self = this->shared_from_this(), data, offset, timeout,
                              done = std::move(done)](beast::error_code ec, size_t n) mutable {
                               self->CancelDeadline();
                               if (ec || self->timed_out_) return done(false);
                               if (offset + n < data.size()) {
                                 return self->WriteAll(data, offset + n, timeout, std::move(done));
                               }
                               done(true);
                             });
  }

  // Writes `data` from a handler thread (through the strand), at most `timeout` for it. False
  // (and every later call false) when it could not be sent whole.
  bool SyncWrite(std::string data, milliseconds timeout) {
    if (failed_ || server_->stopping) {
      failed_ = true;
      return false;
    }
    struct State {
      Mutex mu;
      CondVar cv;
      bool done GUARDED_BY(mu) = false;
      bool ok GUARDED_BY(mu) = false;
      std::string data;
    };
    auto st = std::make_shared<State>();
    st->data = std::move(data);
    net::post(stream_.get_executor(), [self = this->shared_from_this(), st, timeout] {
      self->WriteAll(st->data, 0, timeout, [st](bool ok) {
        MutexLock lock(&st->mu);
        st->done = true;
        st->ok = ok;
        st->cv.NotifyAll();
      });
    });
    bool ok = false;
    {
      MutexLock lock(&st->mu);
      while (!st->done) {
        // The I/O threads ended (Stop() gave up waiting): the write never runs.
        if (!st->cv.WaitFor(st->mu, milliseconds(100)) && server_->io_stopped) break;
      }
      ok = st->done && st->ok;
    }
    if (!ok) failed_ = true;
    return ok;
  }

  // While a handler runs for a client that sent kProgressIntervalHeader (HTTP/1.1 only): sends
  // "102 Processing" interim answers every that many milliseconds (at least 50) on a thread of
  // its own, through SyncWrite; a send that fails ends the ticking (the final answer's write then
  // fails too). The destructor stops and joins the thread: no interim answer follows it.
  class ProgressTicker {
   public:
    ProgressTicker(Session* session, std::string_view interval_ms, unsigned version) {
      if (version < 11 || interval_ms.empty()) return;
      int64_t ms = 0;
      for (char c : interval_ms) {
        if (c < '0' || c > '9' || ms > 3600000) return;
        ms = ms * 10 + (c - '0');
      }
      const auto every = milliseconds(std::max<int64_t>(ms, 50));
      loop_.emplace("http-progress", BackgroundLoop::Options{.interval = every}, [this, session] {
        static constexpr std::string_view kInterim = "HTTP/1.1 102 Processing\r\n\r\n";
        if (!session->SyncWrite(std::string(kInterim), kInterimSendTimeout)) loop_->Stop();
      });
      (void)loop_->Start();
    }
    ProgressTicker(const ProgressTicker&) = delete;
    ProgressTicker& operator=(const ProgressTicker&) = delete;

   private:
    std::optional<BackgroundLoop> loop_;  // ticking; its destructor stops and joins it
  };

  class Writer : public BodyWriter {
   public:
    Writer(Session* session, bool chunked) : session_(session), chunked_(chunked) {}
    bool Write(std::string_view data) override {
      if (session_->failed_ || session_->server_->stopping) {
        session_->failed_ = true;
        return false;
      }
      if (data.empty()) return true;
      if (!chunked_) return session_->SyncWrite(std::string(data), Timeout());
      char size[24];
      int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      std::string frame;
      frame.reserve(static_cast<size_t>(n) + data.size() + 2);
      frame.append(size, static_cast<size_t>(n));
      frame.append(data);
      frame.append("\r\n");
      return session_->SyncWrite(std::move(frame), Timeout());
    }
    bool Connected() override { return session_->Connected(); }

   private:
    milliseconds Timeout() const { return session_->server_->options.idle_timeout; }
    Session* session_;
    bool chunked_;
  };

  // --- answering and closing (on the strand) ---
  void SendResponse(Response resp, unsigned version, bool keep_alive, milliseconds drain) {
    if (failed_) return Close();
    auto out = std::make_shared<Outgoing>();
    auto& res = out->res;
    res.result(static_cast<bhttp::status>(resp.status));
    res.version(version);
    res.set(bhttp::field::server, "sediment");
    // 1xx, 204 and 304 answers have no body and no Content-Length / Content-Type (RFC 9110).
    const bool bodiless = resp.status < 200 || resp.status == 204 || resp.status == 304;
    if (!bodiless) res.set(bhttp::field::content_type, OneLine(resp.content_type));
    // insert, not set: a header may repeat (one X-Sediment-Warning per warning).
    for (const auto& [k, v] : resp.headers) res.insert(k, OneLine(v));
    if (server_->stopping || server_->draining) keep_alive = false;
    res.keep_alive(keep_alive);
    if (!bodiless) {
      res.body() = std::move(resp.body);
      res.prepare_payload();
    }
    out->serializer.emplace(res);
    out->serializer->limit(kWritePiece);
    WriteResponse(std::move(out), keep_alive, drain);
  }

  // An answer being written: the message and its serializer (which refers to it).
  struct Outgoing {
    bhttp::response<bhttp::string_body> res;
    std::optional<bhttp::response_serializer<bhttp::string_body>> serializer;
  };

  // Writes `out` a piece at a time, each within idle_timeout (a slow but steady reader is
  // served whatever the answer's size), then reads the next request or drains and closes.
  void WriteResponse(std::shared_ptr<Outgoing> out, bool keep_alive, milliseconds drain) {
    ArmDeadline(Clock::now() + server_->options.idle_timeout);
    auto& serializer = *out->serializer;
    bhttp::async_write_some(stream_, serializer,
                            [self = this->shared_from_this(), out = std::move(out), keep_alive,
                             drain](beast::error_code ec, size_t) mutable {
                              self->CancelDeadline();
                              if (ec || self->timed_out_) return self->Close();
                              if (!out->serializer->is_done()) {
                                return self->WriteResponse(std::move(out), keep_alive, drain);
                              }
                              if (keep_alive) return self->ReadRequest();
                              self->Drain(drain);
                            });
  }

  // Closes the sending side, then reads and drops what the client still sends for at most
  // `bound` (so it sees the answer instead of a reset), then closes.
  void Drain(milliseconds bound) {
    beast::error_code ec;
    Socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec || server_->stopping) return Close();
    drain_left_ = kDrainBytes;
    drain_buf_ = std::make_unique<std::array<char, 4096>>();
    ArmDeadline(Clock::now() + bound);
    DrainSome();
  }
  void DrainSome() {
    Socket().async_read_some(net::buffer(*drain_buf_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               if (ec || n == 0 || self->timed_out_ || n >= self->drain_left_) {
                                 return self->Close();
                               }
                               self->drain_left_ -= n;
                               self->DrainSome();
                             });
  }

  void Close() {
    CancelDeadline();
    timer_.cancel();
    closed_ = true;
    beast::error_code ec;
    Socket().shutdown(tcp::socket::shutdown_both, ec);
    Socket().close(ec);
  }

  ServerState* const server_;
  Stream stream_;
  net::steady_timer timer_;
  const std::string remote_;
  const int fd_;  // the socket's descriptor; closed only by Close(), after the handler returned
  std::optional<std::string> address_;  // the client's address when admitted (counted)
  std::list<std::weak_ptr<SessionBase>>::iterator registry_it_;
  // On the strand:
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  Clock::time_point deadline_;  // of the operation in progress, when deadline_armed_
  bool deadline_armed_ = false;
  Clock::time_point timer_at_;  // when the pending wait ends, when timer_waiting_
  bool timer_waiting_ = false;
  uint64_t timer_gen_ = 0;  // of the latest wait; an older wait's completion is ignored
  bool timed_out_ = false;  // the last armed deadline fired
  bool idle_ = false;       // waiting for the first byte of a request (PostCloseIfIdle)
  Clock::time_point body_start_;
  uint64_t body_bytes_ = 0;
  size_t drain_left_ = 0;
  std::unique_ptr<std::array<char, 4096>> drain_buf_;
  // Any thread:
  std::atomic<bool> failed_{false};  // a write failed or the client is gone: for good
  std::atomic<bool> closed_{false};
};

template <class Stream>
bool Session<Stream>::WriteStreamed(Response& resp, unsigned version, bool keep_alive) {
  const bool chunked = version >= 11;
  if (!chunked || server_->stopping || server_->draining) keep_alive = false;
  const auto status = static_cast<bhttp::status>(resp.status);
  std::string head = std::string(version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ") +
                     std::to_string(resp.status) + " " +
                     std::string(bhttp::obsolete_reason(status)) + "\r\n";
  head += "Server: sediment\r\nContent-Type: " + OneLine(resp.content_type) + "\r\n";
  for (const auto& [k, v] : resp.headers) head += OneLine(k) + ": " + OneLine(v) + "\r\n";
  if (chunked) head += "Transfer-Encoding: chunked\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  head += "\r\n";
  if (!SyncWrite(std::move(head), server_->options.idle_timeout)) return false;
  Writer writer(this, chunked);
  bool completed = false;
  try {
    completed = resp.stream(writer);
  } catch (const std::exception& e) {
    spdlog::error("http stream producer threw: {}", e.what());
  }
  if (!completed || failed_) return false;
  if (chunked && !SyncWrite("0\r\n\r\n", server_->options.idle_timeout)) return false;
  return keep_alive;
}

void ServerState::Accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void ServerState::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (stopping || draining) return;
  if (ec) {
    // Out of descriptors (EMFILE) and the like: try again shortly rather than spin.
    spdlog::warn("http accept: {}", ec.message());
    accept_retry->expires_after(milliseconds(50));
    accept_retry->async_wait([this](beast::error_code e) {
      if (!e && !stopping) Accept();
    });
    return;
  }
  std::string address;
  std::string remote;
  {
    beast::error_code e;
    auto ep = socket.remote_endpoint(e);
    if (!e) {
      address = ep.address().to_string();
      remote = address + ":" + std::to_string(ep.port());
    }
  }
  bool admitted = false;
  {
    MutexLock lock(&mu);
    int& from = per_address[address];
    if (open < options.max_connections && from < options.max_connections_per_address) {
      ++open;
      ++from;
      admitted = true;
    } else if (from == 0) {
      per_address.erase(address);
    }
  }
  if (tls) {
    auto s = std::make_shared<Session<TlsStream>>(this, std::move(address), std::move(remote),
                                                  admitted, std::move(socket), *tls);
    s->Start();
  } else {
    auto s = std::make_shared<Session<PlainStream>>(this, std::move(address), std::move(remote),
                                                    admitted, std::move(socket));
    s->Start();
  }
  Accept();
}

}  // namespace

struct Server::Impl : ServerState {
  using ServerState::ServerState;
};

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

Server::~Server() { Stop(); }

int Server::open_connections() const {
  MutexLock lock(&impl_->mu);
  return impl_->open;
}

Server::Counters Server::counters() const {
  return {.timer_waits = impl_->counters.timer_waits.load(std::memory_order_relaxed),
          .body_reads = impl_->counters.body_reads.load(std::memory_order_relaxed)};
}

Status Server::Start() {
  auto& o = impl_->options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Status::InvalidArgument("TLS needs both a certificate file and a key file");
  }
  if (!o.tls_cert_file.empty()) {
    auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                     net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                     net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    // Read through Env (its errors name the path and the cause), parsed by OpenSSL.
    auto cert = Env::Default()->ReadFile(o.tls_cert_file);
    if (!cert.ok()) {
      return Status::InvalidArgument("cannot read the TLS certificate file '" + o.tls_cert_file +
                                     "': " + cert.status().ToString());
    }
    auto key = Env::Default()->ReadFile(o.tls_key_file);
    if (!key.ok()) {
      return Status::InvalidArgument("cannot read the TLS key file '" + o.tls_key_file +
                                     "': " + key.status().ToString());
    }
    beast::error_code ec;
    ctx->use_certificate_chain(net::buffer(*cert), ec);
    if (ec) {
      return Status::InvalidArgument("cannot load the TLS certificate file '" + o.tls_cert_file +
                                     "': " + TlsErrorText(ec));
    }
    ctx->use_private_key(net::buffer(*key), net::ssl::context::pem, ec);
    if (ec) {
      return Status::InvalidArgument("cannot load the TLS key file '" + o.tls_key_file +
                                     "': " + TlsErrorText(ec));
    }
    impl_->tls = std::move(ctx);
  }
  RaiseFileLimit(o.max_connections);
  beast::error_code ec;
  auto addr = net::ip::make_address(o.host, ec);
  if (ec) return Status::InvalidArgument("bad listen address '" + o.host + "'");
  tcp::endpoint ep(addr, o.port);
  impl_->acceptor.emplace(net::make_strand(impl_->ioc));
  impl_->acceptor->open(ep.protocol(), ec);
  if (!ec) impl_->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor->bind(ep, ec);
  if (!ec) impl_->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " +
                           ec.message());
  }
  port_ = impl_->acceptor->local_endpoint().port();
  impl_->accept_retry.emplace(impl_->acceptor->get_executor());
  impl_->started = true;
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->Accept();
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    impl_->io_threads.emplace_back([this] { impl_->ioc.run(); });
  }
  return Status::OK();
}

void Server::StopGracefully(Clock::time_point deadline) {
  if (!impl_ || !impl_->started || impl_->stopping) return;
  if (impl_->draining.exchange(true)) return;
  impl_->CloseAcceptor();
  std::vector<std::shared_ptr<SessionBase>> live = impl_->LiveSessions();
  for (auto& s : live) s->PostCloseIfIdle();
  live.clear();  // outside the lock: the last reference runs the destructor, which takes it
  MutexLock lock(&impl_->mu);
  while (!impl_->sessions.empty() && Clock::now() < deadline) {
    impl_->sessions_changed.WaitUntil(impl_->mu, deadline);
  }
  if (!impl_->sessions.empty()) {
    spdlog::warn("http: {} connections still busy at the shutdown deadline; closing them",
                 impl_->sessions.size());
  }
}

void Server::Stop() {
  if (!impl_ || !impl_->started) return;
  if (impl_->stopping.exchange(true)) return;
  impl_->CloseAcceptor();
  std::vector<std::shared_ptr<SessionBase>> live = impl_->LiveSessions();
  for (auto& s : live) s->PostStop();
  live.clear();  // outside the lock: the last reference runs the destructor, which takes it
  {
    const auto until = Clock::now() + std::chrono::seconds(10);
    MutexLock lock(&impl_->mu);
    while (!impl_->sessions.empty() && Clock::now() < until) {
      impl_->sessions_changed.WaitUntil(impl_->mu, until);
    }
    if (!impl_->sessions.empty()) {
      spdlog::warn("http: {} connections still busy 10 s after stopping", impl_->sessions.size());
    }
  }
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->io_threads) t.join();
  impl_->io_threads.clear();
  impl_->io_stopped = true;
  impl_->pool.Close();
}

}  // namespace sediment::http
