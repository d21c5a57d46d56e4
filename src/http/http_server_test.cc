#include "http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace sediment::http {
namespace {

// Set by the /stream-until-gone handler once BodyWriter::Connected() turned false.
std::atomic<bool> g_noticed_gone{false};
std::atomic<int> g_chunks_after_gone{0};

// The /wait-for-client handler: what Request::client_connected said while the client waited for
// the answer, and whether its DisconnectWatch fired (within 10 s) after the client left.
std::atomic<bool> g_waiting{false};
std::atomic<bool> g_connected_while_waiting{false};
std::atomic<bool> g_saw_client_leave{false};

// Answers once a DisconnectWatch saw the client leave: a long request (a query) that must stop
// working for a client that left.
Response WaitForClientHandler(const Request& r) {
  Response resp;
  if (!r.client_connected) {
    resp.status = 500;
    return resp;
  }
  std::atomic<bool> gone{false};
  DisconnectWatch watch(r, &gone, std::chrono::milliseconds(10));
  g_connected_while_waiting = r.client_connected();
  g_waiting = true;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gone && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  g_saw_client_leave = gone.load();
  return resp;
}

// Handlers of the streaming tests (paths starting with /stream).
Response StreamingHandler(const Request& r) {
  Response resp;
  resp.content_type = "text/plain";
  resp.headers.emplace_back("X-Multi", "one");
  resp.headers.emplace_back("X-Multi", "two");
  if (r.path == "/stream") {
    resp.stream = [](BodyWriter& w) {
      return w.Write("alpha,") && w.Write("") && w.Write("beta,") &&
             w.Write(std::string(70000, 'z'));
    };
  } else if (r.path == "/stream-abort") {
    resp.stream = [](BodyWriter& w) {
      (void)w.Write("partial");
      return false;
    };
  } else if (r.path == "/stream-until-gone") {
    resp.stream = [](BodyWriter& w) {
      if (!w.Write("first\n")) return false;
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < until) {
        if (!w.Connected()) {
          g_noticed_gone = true;
          // Writes after the client left fail.
          for (int i = 0; i < 50; ++i) {
            if (w.Write(std::string(65536, 'x'))) ++g_chunks_after_gone;
          }
          return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return true;
    };
  } else if (r.path == "/stream-204") {
    resp.status = 204;
  } else {
    resp.body = "plain";
  }
  return resp;
}

// A socket connected to 127.0.0.1:port (a test failure when the connect fails).
int ConnectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// Requests /stream-until-gone and reads until its first chunk arrived; returns the socket, or -1
// (after a test failure) when the request or the chunk did not get through.
int OpenStreamUntilGone(uint16_t port) {
  int fd = ConnectLoopback(port);
  std::string req = "GET /stream-until-gone HTTP/1.1\r\nHost: h\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ADD_FAILURE() << "could not send the request";
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  while (got.find("first\n") == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      ADD_FAILURE() << "no first chunk; got: " << got;
      ::close(fd);
      return -1;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return fd;
}

// Sends raw bytes to 127.0.0.1:port and returns everything the server answers until it closes or
// stops answering for a second.
std::string RoundTrip(uint16_t port, const std::string& raw) {
  int fd = ConnectLoopback(port);
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
    o.admit = [](const Request& r) -> std::optional<Response> {
      if (r.path != "/guarded" || !r.Header("authorization").empty()) return std::nullopt;
      if (!r.body.empty()) return JsonError(500, "admit saw a body");
      return JsonError(401, "no token");
    };
    server_ = std::make_unique<Server>(o, [](const Request& r) {
      if (r.path == "/throw") throw std::runtime_error("boom");
      if (r.path.rfind("/stream", 0) == 0 || r.path == "/multi") return StreamingHandler(r);
      if (r.path == "/wait-for-client") return WaitForClientHandler(r);
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

// The admit callback answers from the header: the body is never read (here it never even
// arrives: the client sends 10 of the 900 announced bytes and waits).
TEST_F(HttpServerTest, AdmitRefusesFromTheHeaderWithoutReadingTheBody) {
  int fd = ConnectLoopback(server_->port());
  std::string raw = "POST /guarded HTTP/1.1\r\nHost: h\r\nContent-Length: 900\r\n\r\n0123456789";
  ASSERT_EQ(::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL), static_cast<ssize_t>(raw.size()));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  while (out.find("no token") == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  EXPECT_EQ(out.rfind("HTTP/1.1 401", 0), 0u) << out;
  EXPECT_NE(out.find("no token"), std::string::npos) << out;
  // Admitted: the handler gets the body.
  std::string ok = RoundTrip(server_->port(),
                             "POST /guarded HTTP/1.1\r\nHost: h\r\nAuthorization: t\r\n"
                             "Content-Length: 3\r\nConnection: close\r\n\r\nabc");
  EXPECT_NE(ok.find("body=abc"), std::string::npos) << ok;
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

namespace sediment::http {
namespace {

// Decodes a chunked body (starting at `pos`, just after the headers) into `out`; false when the
// framing is broken or the terminating chunk is missing.
bool Dechunk(const std::string& raw, size_t pos, std::string* out, size_t* end = nullptr) {
  out->clear();
  while (true) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    size_t size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    pos = eol + 2;
    if (size == 0) {
      if (raw.compare(pos, 2, "\r\n") != 0) return false;
      if (end) *end = pos + 2;
      return true;
    }
    if (pos + size + 2 > raw.size() || raw.compare(pos + size, 2, "\r\n") != 0) return false;
    out->append(raw, pos, size);
    pos += size + 2;
  }
}

TEST_F(HttpServerTest, StreamedBodyIsChunkedAndComplete) {
  std::string out =
      RoundTrip(server_->port(), "GET /stream HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  ASSERT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out.substr(0, 300);
  ASSERT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << out.substr(0, 300);
  EXPECT_EQ(out.find("Content-Length"), std::string::npos);
  size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  std::string body;
  ASSERT_TRUE(Dechunk(out, head_end + 4, &body)) << out.substr(0, 300);
  EXPECT_EQ(body, "alpha,beta," + std::string(70000, 'z'));
}

TEST_F(HttpServerTest, KeepAliveContinuesAfterAStreamedBody) {
  std::string out = RoundTrip(server_->port(),
                              "GET /stream HTTP/1.1\r\nHost: h\r\n\r\nGET /plain HTTP/1.1\r\nHost: "
                              "h\r\nConnection: close\r\n\r\n");
  size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  std::string body;
  size_t end = 0;
  ASSERT_TRUE(Dechunk(out, head_end + 4, &body, &end));
  EXPECT_EQ(body.substr(0, 11), "alpha,beta,");
  std::string second = out.substr(end);
  EXPECT_EQ(second.rfind("HTTP/1.1 200", 0), 0u) << second.substr(0, 200);
  EXPECT_NE(second.find("\r\n\r\nGET /plain"), std::string::npos) << second;
}

TEST_F(HttpServerTest, Http10StreamIsRawBytesThenClose) {
  std::string out = RoundTrip(server_->port(), "GET /stream HTTP/1.0\r\nHost: h\r\n\r\n");
  ASSERT_NE(out.find("HTTP/1.0 200"), std::string::npos) << out.substr(0, 300);
  EXPECT_EQ(out.find("chunked"), std::string::npos);
  size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(out.substr(head_end + 4), "alpha,beta," + std::string(70000, 'z'));
}

TEST_F(HttpServerTest, AbortedStreamLacksTheTerminatingChunk) {
  std::string out = RoundTrip(server_->port(), "GET /stream-abort HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_NE(out.find("partial"), std::string::npos) << out;
  std::string body;
  EXPECT_FALSE(Dechunk(out, head_end + 4, &body)) << out;
}

TEST_F(HttpServerTest, HeadersMayRepeat) {
  for (const char* path : {"/multi", "/stream"}) {
    std::string out = RoundTrip(server_->port(), std::string("GET ") + path +
                                                     " HTTP/1.1\r\nHost: h\r\nConnection: "
                                                     "close\r\n\r\n");
    EXPECT_NE(out.find("X-Multi: one\r\n"), std::string::npos)
        << path << ": " << out.substr(0, 300);
    EXPECT_NE(out.find("X-Multi: two\r\n"), std::string::npos)
        << path << ": " << out.substr(0, 300);
  }
}

TEST_F(HttpServerTest, NoContentHasNoBodyHeadersAndKeepsTheConnection) {
  std::string out = RoundTrip(server_->port(),
                              "DELETE /stream-204 HTTP/1.1\r\nHost: h\r\n\r\nGET /plain "
                              "HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(out.rfind("HTTP/1.1 204", 0), 0u) << out;
  size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  std::string head = out.substr(0, head_end);
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Type"), std::string::npos) << head;
  EXPECT_EQ(out.substr(head_end + 4).rfind("HTTP/1.1 200", 0), 0u) << out;
}

TEST_F(HttpServerTest, ProducerNoticesAClientThatLeft) {
  g_noticed_gone = false;
  g_chunks_after_gone = 0;
  int fd = OpenStreamUntilGone(server_->port());
  ASSERT_GE(fd, 0);
  // Still connected: the producer keeps going.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(g_noticed_gone.load());
  ::close(fd);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!g_noticed_gone && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(g_noticed_gone.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(g_chunks_after_gone.load(), 0);
}

// A handler learns, while it runs and from any thread, whether its client is still there.
TEST_F(HttpServerTest, HandlerNoticesAClientThatLeftBeforeTheAnswer) {
  g_waiting = false;
  g_connected_while_waiting = false;
  g_saw_client_leave = false;
  int fd = ConnectLoopback(server_->port());
  std::string req = "GET /wait-for-client HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!g_waiting && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(g_waiting.load());
  EXPECT_TRUE(g_connected_while_waiting.load());
  // Still connected: the handler keeps waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(g_saw_client_leave.load());
  ::close(fd);
  until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!g_saw_client_leave && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(g_saw_client_leave.load());
}

// A watch without a socket does nothing; a watch ends at destruction, not after its period.
TEST(DisconnectWatchTest, DoesNothingWithoutASocketAndStopsAtOnce) {
  std::atomic<bool> gone{false};
  { DisconnectWatch none(Request{}, &gone, std::chrono::milliseconds(1)); }
  EXPECT_FALSE(gone.load());
  Request r;
  std::atomic<int> asked{0};
  r.client_connected = [&asked] {
    ++asked;
    return true;
  };
  auto t0 = std::chrono::steady_clock::now();
  { DisconnectWatch hourly(r, &gone, std::chrono::hours(1)); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(asked.load(), 0);
  {
    DisconnectWatch often(r, &gone, std::chrono::milliseconds(1));
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (asked < 3 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_GE(asked.load(), 3);
  EXPECT_FALSE(gone.load());
}

TEST_F(HttpServerTest, StopEndsAStreamThatWaitsForItsClient) {
  g_noticed_gone = false;
  int fd = OpenStreamUntilGone(server_->port());
  ASSERT_GE(fd, 0);
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(g_noticed_gone.load());
  ::close(fd);
}

// The graceful part of a shutdown: an idle connection is closed, new ones are refused, a request
// whose body is still arriving is read to its end and answered (Connection: close), and
// StopGracefully returns once it was.
TEST_F(HttpServerTest, StopGracefullyAnswersTheRequestInProgressAndClosesIdleConnections) {
  const uint16_t port = server_->port();
  int idle = ConnectLoopback(port);
  int busy = ConnectLoopback(port);
  std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhello";
  ASSERT_EQ(::send(busy, head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server read the header

  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> returned{false};
  std::thread stopper([&] {
    server_->StopGracefully(t0 + std::chrono::seconds(10));
    returned = true;
  });
  timeval tv{3, 0};
  ::setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  EXPECT_EQ(::recv(idle, &c, 1, 0), 0) << "the idle connection was not closed";
  ::close(idle);
  int fresh = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(fresh, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << "a new connection was accepted while stopping";
  ::close(fresh);
  EXPECT_FALSE(returned.load()) << "returned with a request in progress";

  ASSERT_EQ(::send(busy, "world", 5, MSG_NOSIGNAL), 5);
  ::setsockopt(busy, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string answer;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(busy, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(busy);
  stopper.join();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_NE(answer.find("body=helloworld"), std::string::npos) << answer;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
}

TEST_F(HttpServerTest, StopGracefullyReturnsAtTheDeadline) {
  int busy = ConnectLoopback(server_->port());
  std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhel";
  ASSERT_EQ(::send(busy, head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  server_->StopGracefully(t0 + std::chrono::milliseconds(500));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(450));
  EXPECT_LT(took, std::chrono::seconds(3));
  server_->Stop();  // ends the request that never completes
  ::close(busy);
}

}  // namespace
}  // namespace sediment::http
