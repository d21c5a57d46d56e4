#include "http/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <limits>
#include <optional>

#include "common/clock.h"

namespace sediment::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

// How often a running exchange looks at FetchOptions::cancel.
constexpr auto kCancelPoll = std::chrono::milliseconds(20);

// One exchange. Every step is an asynchronous operation run on this thread's io_context, because
// the stream's expiry only bounds asynchronous operations (a synchronous read of a frozen server
// waits forever). A TLS stream is layered over tcp(), so the expiry and the cancellation of tcp()
// bound its handshake, reads and writes too.
class Exchange {
 public:
  Exchange(const FetchOptions& options, std::string hostport)
      : options_(options), hostport_(std::move(hostport)), stream_(ioc_) {
    if (options.timeout.count() > 0) deadline_ = SteadyNow() + options.timeout;
  }

  // Runs one asynchronous operation that `start` begins (its completion handler is passed to it),
  // with the stream expiring at `expiry` (or the whole exchange's deadline when earlier). Returns
  // its error; `*expired_early` tells whether a timeout came from `expiry` rather than the whole
  // deadline. Sets cancelled_ when FetchOptions::cancel turned true meanwhile.
  template <class Start>
  beast::error_code Run(std::optional<SteadyClock::time_point> expiry, Start&& start,
                        bool* expired_early = nullptr) {
    std::optional<SteadyClock::time_point> at = deadline_;
    bool early = false;
    if (expiry && (!at || *expiry < *at)) {
      at = expiry;
      early = true;
    }
    if (expired_early) *expired_early = early;
    if (at) {
      stream_.expires_at(*at);
    } else {
      stream_.expires_never();
    }
    beast::error_code result;
    bool done = false;
    start([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    ioc_.restart();
    while (!done) {
      ioc_.run_one_for(kCancelPoll);
      if (!done && !cancelled_ && options_.cancel && options_.cancel->load()) {
        cancelled_ = true;
        stream_.cancel();  // the operation completes with operation_aborted
      }
    }
    return result;
  }

  // The expiry of a wait for the server's next bytes (progress_timeout from now), if any.
  std::optional<SteadyClock::time_point> ProgressExpiry() const {
    if (options_.progress_timeout.count() <= 0) return std::nullopt;
    return SteadyNow() + options_.progress_timeout;
  }

  // The status of a step that failed with `ec` (`what` names the step, e.g. "reading from"), or
  // OK when it did not fail.
  Status Failure(beast::error_code ec, const char* what, bool early) const {
    if (cancelled_) return Status::Cancelled("request to " + hostport_ + " abandoned");
    if (ec == beast::error::timeout) {
      if (early) {
        return Status::Unavailable("no answer from " + hostport_ + " for " +
                                   std::to_string(options_.progress_timeout.count()) +
                                   " ms (progress timeout)");
      }
      return Status::Unavailable(std::string(what) + " " + hostport_ +
                                 ": no complete answer within " +
                                 std::to_string(options_.timeout.count()) + " ms");
    }
    if (ec) return Status::Unavailable(std::string(what) + " " + hostport_ + ": " + ec.message());
    return Status::OK();
  }

  bool cancelled() const { return cancelled_; }
  net::io_context& ioc() { return ioc_; }
  beast::tcp_stream& tcp() { return stream_; }

 private:
  const FetchOptions& options_;
  const std::string hostport_;
  net::io_context ioc_;
  beast::tcp_stream stream_;
  std::optional<SteadyClock::time_point> deadline_;
  bool cancelled_ = false;
};

// Sends `req` on `stream` (the TCP stream or the TLS stream over it) and reads answers until the
// final (non-1xx) one; every read must bring bytes within the progress timeout.
template <class Stream>
Result<ClientResponse> Converse(Exchange& x, Stream& stream,
                                bhttp::request<bhttp::string_body>& req) {
  beast::error_code ec = x.Run(
      std::nullopt, [&](auto handler) { bhttp::async_write(stream, req, std::move(handler)); });
  RETURN_IF_ERROR(x.Failure(ec, "sending to", false));
  beast::flat_buffer buffer;
  // Beast reads into the buffer's free space, at most 64 KiB and at least 512 bytes: without
  // room an answer (a segment file) would arrive 512 bytes per system call.
  buffer.reserve(64u << 10);
  ClientResponse out;
  while (true) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    while (!parser.is_done()) {
      bool early = false;
      ++out.reads;
      ec = x.Run(
          x.ProgressExpiry(),
          [&](auto handler) { bhttp::async_read_some(stream, buffer, parser, std::move(handler)); },
          &early);
      RETURN_IF_ERROR(x.Failure(ec, "reading from", early));
    }
    auto& res = parser.get();
    if (res.result_int() / 100 == 1) {
      ++out.interim_answers;  // 1xx: the final answer follows
      continue;
    }
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    for (const auto& h : res) {
      out.headers.emplace_back(std::string(h.name_string()), std::string(h.value()));
    }
    return out;
  }
}

// The TLS client context of one exchange: the server's certificate must chain to
// options.ca_file (or the system's CAs).
Result<std::unique_ptr<ssl::context>> ClientContext(const FetchOptions& options) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  beast::error_code ec;
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (!ec) {
    if (options.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
    } else {
      ctx->load_verify_file(options.ca_file, ec);
    }
  }
  if (ec) {
    return Status::InvalidArgument(
        "TLS: cannot load the CA bundle " +
        (options.ca_file.empty() ? std::string("(system default)") : "'" + options.ca_file + "'") +
        ": " + ec.message());
  }
  return ctx;
}

// Names the server `host` (a name or an IP literal) to the TLS stream: SNI for a name, and with
// options.verify_host the name (DNS SAN, else CN) or IP literal (IP SAN) the certificate must
// carry.
Status SetPeerName(SSL* ssl, const std::string& host, bool verify_host) {
  beast::error_code ec;
  net::ip::make_address(host, ec);
  const bool is_ip = !ec;
  if (!is_ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return Status::InvalidArgument("TLS: cannot send the server name '" + host + "'");
  }
  if (!verify_host) return Status::OK();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  int set = 0;
  if (is_ip) {
    set = X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    set = X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  }
  if (set != 1) return Status::InvalidArgument("TLS: cannot check the host name '" + host + "'");
  return Status::OK();
}

struct ParsedUrl {
  bool tls = false;
  std::string hostport;  // as in the URL (the Host header)
  std::string host;      // without the brackets of an IPv6 literal
  std::string port;
  std::string target;
};

Result<ParsedUrl> ParseUrl(const std::string& url) {
  ParsedUrl u;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else {
    return Status::InvalidArgument("only http:// and https:// URLs: " + url);
  }
  auto slash = rest.find('/');
  u.hostport = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string port_part;
  if (!u.hostport.empty() && u.hostport.front() == '[') {
    auto close = u.hostport.find(']');
    if (close == std::string::npos) return Status::InvalidArgument("bad IPv6 host in " + url);
    u.host = u.hostport.substr(1, close - 1);
    if (close + 1 < u.hostport.size()) {
      if (u.hostport[close + 1] != ':') return Status::InvalidArgument("bad host in " + url);
      port_part = u.hostport.substr(close + 2);
    }
  } else {
    auto colon = u.hostport.rfind(':');
    u.host = u.hostport.substr(0, colon);
    if (colon != std::string::npos) port_part = u.hostport.substr(colon + 1);
  }
  if (u.host.empty()) return Status::InvalidArgument("no host in " + url);
  u.port = !port_part.empty() ? port_part : (u.tls ? "443" : "80");
  return u;
}

}  // namespace

Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, const FetchOptions& options) {
  auto parsed = ParseUrl(url);
  if (!parsed.ok()) return parsed.status();
  const ParsedUrl& u = *parsed;
  try {
    Exchange x(options, u.hostport);
    tcp::resolver resolver(x.ioc());
    beast::error_code ec;
    auto results = resolver.resolve(u.host, u.port, ec);
    if (ec) return Status::Unavailable("cannot resolve " + u.host + ": " + ec.message());
    ec = x.Run(std::nullopt,
               [&](auto handler) { x.tcp().async_connect(results, std::move(handler)); });
    if (ec && ec != beast::error::timeout && !x.cancelled()) {
      return Status::Unavailable("cannot connect to " + u.hostport + ": " + ec.message());
    }
    RETURN_IF_ERROR(x.Failure(ec, "connecting to", false));

    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), u.target, 11};
    req.set(bhttp::field::host, u.hostport);
    req.set(bhttp::field::user_agent, "sediment-cli");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (options.progress_interval.count() > 0) {
      req.set(kProgressIntervalHeader, std::to_string(options.progress_interval.count()));
    }
    req.body() = body;
    req.prepare_payload();

    std::optional<Result<ClientResponse>> out;
    if (!u.tls) {
      out.emplace(Converse(x, x.tcp(), req));
    } else {
      auto ctx = ClientContext(options);
      if (!ctx.ok()) return ctx.status();
      ssl::stream<beast::tcp_stream&> tls(x.tcp(), **ctx);
      RETURN_IF_ERROR(SetPeerName(tls.native_handle(), u.host, options.verify_host));
      // The handshake waits for the server's bytes like a read does: a server that accepted the
      // connection and froze is given up after the progress timeout.
      bool early = false;
      ec = x.Run(
          x.ProgressExpiry(),
          [&](auto handler) { tls.async_handshake(ssl::stream_base::client, std::move(handler)); },
          &early);
      if (ec && ec != beast::error::timeout && !x.cancelled()) {
        const long verify = SSL_get_verify_result(tls.native_handle());
        if (verify != X509_V_OK) {
          return Status::Unavailable("TLS: the certificate of " + u.hostport +
                                     " is not trusted: " + X509_verify_cert_error_string(verify));
        }
        return Status::Unavailable("TLS handshake with " + u.hostport + " failed: " + ec.message());
      }
      RETURN_IF_ERROR(x.Failure(ec, "TLS handshake with", early));
      out.emplace(Converse(x, tls, req));
    }
    // The answer is complete (its length is known): the connection is closed without waiting
    // for the server's TLS close_notify.
    x.tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    return std::move(*out);
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("http ") + e.what());
  }
}

Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, std::chrono::seconds timeout) {
  FetchOptions options;
  options.timeout = timeout;
  return Fetch(method, url, headers, body, options);
}

std::string PeerTls::Url(std::string_view address, std::string_view path) const {
  std::string url = https ? "https://" : "http://";
  url.append(address).append(path);
  return url;
}

Status PeerTls::Check() const {
  if (!https) return Status::OK();
  try {
    auto ctx = ClientContext(Options());
    return ctx.ok() ? Status::OK() : ctx.status();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("TLS: ") + e.what());
  }
}

FetchOptions PeerTls::Options(FetchOptions base) const {
  base.ca_file = ca_file;
  base.verify_host = true;
  return base;
}

}  // namespace sediment::http
