#include "http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <string>
#include <thread>
#include <vector>

namespace sediment::http {
namespace {

// Sends raw bytes to 127.0.0.1:port and returns everything the server answers until it closes or
// stops answering for a second.
std::string RoundTrip(uint16_t port, const std::string& raw) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  size_t sent = 0;
  while (sent < raw.size()) {
    ssize_t n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.max_body_bytes = 1000;
    server_ = std::make_unique<Server>(o, [](const Request& r) {
      if (r.path == "/throw") throw std::runtime_error("boom");
      Response resp;
      resp.body = r.method + " " + r.path + " q=" + (r.query.count("a") ? r.query.at("a") : "") +
                  " auth=" + std::string(r.Header("authorization")) + " body=" + r.body;
      resp.content_type = "text/plain";
      return resp;
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }
  std::unique_ptr<Server> server_;
};

TEST_F(HttpServerTest, RoutesPathQueryHeadersAndBody) {
  std::string out = RoundTrip(server_->port(),
                              "POST /x%20y?a=1%2B2+3 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer "
                              "t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(out.find("POST /x y q=1+2 3 auth=Bearer t body=hello"), std::string::npos) << out;
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequests) {
  std::string one = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  std::string out = RoundTrip(server_->port(), one + one + one);
  size_t count = 0;
  for (size_t p = out.find("HTTP/1.1 200"); p != std::string::npos;
       p = out.find("HTTP/1.1 200", p + 1))
    ++count;
  EXPECT_EQ(count, 3u) << out;
}

TEST_F(HttpServerTest, BodyOverLimitIs413) {
  std::string body(5000, 'x');
  std::string out = RoundTrip(server_->port(), "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: " +
                                                   std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_NE(out.find("HTTP/1.1 413"), std::string::npos) << out;
  EXPECT_NE(out.find("larger than the limit"), std::string::npos) << out;
}

TEST_F(HttpServerTest, MalformedRequestIs400AndServerSurvives) {
  std::string out = RoundTrip(server_->port(), "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_NE(out.find("400"), std::string::npos) << out;
  std::string ok =
      RoundTrip(server_->port(), "GET /ok HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ok.find("HTTP/1.1 200"), std::string::npos) << ok;
}

TEST_F(HttpServerTest, HandlerExceptionIs500) {
  std::string out =
      RoundTrip(server_->port(), "GET /throw HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 500"), std::string::npos) << out;
}

TEST_F(HttpServerTest, ConcurrentClients) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      std::string out =
          RoundTrip(server_->port(), "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: " +
                                         std::to_string(std::to_string(i).size()) +
                                         "\r\nConnection: close\r\n\r\n" + std::to_string(i));
      if (out.find("body=" + std::to_string(i)) != std::string::npos) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
}

}  // namespace
}  // namespace sediment::http

namespace sediment::http {
namespace {

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(data.size() + 1024, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string Post(uint16_t port, const std::string& encoding, const std::string& body) {
  return RoundTrip(port, "POST /z HTTP/1.1\r\nHost: h\r\nContent-Encoding: " + encoding +
                             "\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body);
}

TEST_F(HttpServerTest, GzipBodiesAreDecoded) {
  std::string out = Post(server_->port(), "gzip", Gzip("line one\nline two\n"));
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(out.find("body=line one\nline two\n"), std::string::npos) << out;
  // Two concatenated members decode to both.
  out = Post(server_->port(), "gzip", Gzip("a\n") + Gzip("b\n"));
  EXPECT_NE(out.find("body=a\nb\n"), std::string::npos) << out;
}

TEST_F(HttpServerTest, BadOrOversizedOrUnknownEncodingIsRejected) {
  EXPECT_NE(Post(server_->port(), "gzip", "not gzip at all").find("HTTP/1.1 400"),
            std::string::npos);
  std::string gz = Gzip("x");
  EXPECT_NE(Post(server_->port(), "gzip", gz.substr(0, gz.size() - 6)).find("HTTP/1.1 400"),
            std::string::npos);
  // 5000 bytes decoded > the 1000-byte limit, though the compressed body is small.
  EXPECT_NE(Post(server_->port(), "gzip", Gzip(std::string(5000, 'a'))).find("HTTP/1.1 413"),
            std::string::npos);
  EXPECT_NE(Post(server_->port(), "br", "xx").find("HTTP/1.1 415"), std::string::npos);
}

}  // namespace
}  // namespace sediment::http
