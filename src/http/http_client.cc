#include "http/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sediment::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

Result<ClientResponse> Fetch(const std::string& method, const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, std::chrono::seconds timeout) {
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
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.expires_after(timeout);
    beast::error_code ec;
    auto results = resolver.resolve(host, port, ec);
    if (ec) return Status::Unavailable("cannot resolve " + host + ": " + ec.message());
    stream.connect(results, ec);
    if (ec) return Status::Unavailable("cannot connect to " + hostport + ": " + ec.message());
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, hostport);
    req.set(bhttp::field::user_agent, "sediment-cli");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req, ec);
    if (ec) return Status::Unavailable("sending to " + hostport + ": " + ec.message());
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    bhttp::read(stream, buffer, parser, ec);
    if (ec) return Status::Unavailable("reading from " + hostport + ": " + ec.message());
    auto& res = parser.get();
    ClientResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    for (const auto& h : res) {
      out.headers.emplace_back(std::string(h.name_string()), std::string(h.value()));
    }
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return out;
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("http ") + e.what());
  }
}

}  // namespace sediment::http
