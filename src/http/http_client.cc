#include "http/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
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
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

// How often a running exchange looks at FetchOptions::cancel.
constexpr auto kCancelPoll = std::chrono::milliseconds(20);

// One exchange. Every step is an asynchronous operation run on this thread's io_context, because
// the stream's expiry only bounds asynchronous operations (a synchronous read of a frozen server
// waits forever).
class Exchange {
 public:
  explicit Exchange(const FetchOptions& options) : options_(options), stream_(ioc_) {
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

  bool cancelled() const { return cancelled_; }
  net::io_context& ioc() { return ioc_; }
  beast::tcp_stream& stream() { return stream_; }

 private:
  const FetchOptions& options_;
  net::io_context ioc_;
  beast::tcp_stream stream_;
  std::optional<SteadyClock::time_point> deadline_;
  bool cancelled_ = false;
};

}  // namespace

Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, const FetchOptions& options) {
  static const std::string kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return Status::InvalidArgument("only http:// URLs: " + url);
  std::string rest = url.substr(kScheme.size());
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = hostport.rfind(':');
  std::string host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  std::string port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  try {
    Exchange x(options);
    auto abandoned = [&] { return Status::Cancelled("request to " + hostport + " abandoned"); };
    auto timed_out = [&](const char* what, bool early) {
      if (early) {
        return Status::Unavailable("no answer from " + hostport + " for " +
                                   std::to_string(options.progress_timeout.count()) +
                                   " ms (progress timeout)");
      }
      return Status::Unavailable(std::string(what) + " " + hostport +
                                 ": no complete answer within " +
                                 std::to_string(options.timeout.count()) + " ms");
    };
    tcp::resolver resolver(x.ioc());
    beast::error_code ec;
    auto results = resolver.resolve(host, port, ec);
    if (ec) return Status::Unavailable("cannot resolve " + host + ": " + ec.message());
    ec = x.Run(std::nullopt,
               [&](auto handler) { x.stream().async_connect(results, std::move(handler)); });
    if (x.cancelled()) return abandoned();
    if (ec == beast::error::timeout) return timed_out("connecting to", false);
    if (ec) return Status::Unavailable("cannot connect to " + hostport + ": " + ec.message());

    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, hostport);
    req.set(bhttp::field::user_agent, "sediment-cli");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (options.progress_interval.count() > 0) {
      req.set(kProgressIntervalHeader, std::to_string(options.progress_interval.count()));
    }
    req.body() = body;
    req.prepare_payload();
    ec = x.Run(std::nullopt,
               [&](auto handler) { bhttp::async_write(x.stream(), req, std::move(handler)); });
    if (x.cancelled()) return abandoned();
    if (ec == beast::error::timeout) return timed_out("sending to", false);
    if (ec) return Status::Unavailable("sending to " + hostport + ": " + ec.message());

    // Answers until the final (non-1xx) one; every read must bring bytes within the progress
    // timeout.
    beast::flat_buffer buffer;
    ClientResponse out;
    while (true) {
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      while (!parser.is_done()) {
        std::optional<SteadyClock::time_point> progress;
        if (options.progress_timeout.count() > 0) {
          progress = SteadyNow() + options.progress_timeout;
        }
        bool early = false;
        ec = x.Run(
            progress,
            [&](auto handler) {
              bhttp::async_read_some(x.stream(), buffer, parser, std::move(handler));
            },
            &early);
        if (x.cancelled()) return abandoned();
        if (ec == beast::error::timeout) return timed_out("reading from", early);
        if (ec) return Status::Unavailable("reading from " + hostport + ": " + ec.message());
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
      break;
    }
    x.stream().socket().shutdown(tcp::socket::shutdown_both, ec);
    return out;
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

}  // namespace sediment::http
