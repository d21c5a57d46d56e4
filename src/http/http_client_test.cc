// The client's bounds against servers that accept a request and then never answer (a frozen
// process: its kernel still accepts connections), and the server's "102 Processing" answers that
// let a slow handler show progress.
#include "http/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "http/frozen_listener_testing.h"
#include "http/http_server.h"

namespace sediment::http {
namespace {

using Clock = std::chrono::steady_clock;

using testing::FrozenListener;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(HttpClientTest, FrozenServerIsGivenUpAfterTheProgressTimeout) {
  FrozenListener frozen;
  FetchOptions o;
  o.timeout = std::chrono::seconds(20);
  o.progress_timeout = std::chrono::milliseconds(300);
  auto t0 = Clock::now();
  auto r = Fetch("POST", frozen.url("/internal/v1/query/partial"), {}, "{}", o);
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("300 ms (progress timeout)"), std::string::npos)
      << r.status().ToString();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 3.0);
}

TEST(HttpClientTest, TheWholeExchangeIsBoundedToo) {
  FrozenListener frozen;
  auto t0 = Clock::now();
  auto r = Fetch("GET", frozen.url("/"), {}, "", std::chrono::seconds(1));
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no complete answer within 1000 ms"), std::string::npos)
      << r.status().ToString();
  EXPECT_GE(took, 0.99);
  EXPECT_LT(took, 4.0);
}

TEST(HttpClientTest, CancelAbandonsTheExchangeAtOnce) {
  FrozenListener frozen;
  std::atomic<bool> cancel{false};
  FetchOptions o;
  o.timeout = std::chrono::seconds(20);
  o.cancel = &cancel;
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  auto t0 = Clock::now();
  auto r = Fetch("GET", frozen.url("/"), {}, "", o);
  const double took = SecondsSince(t0);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 1.5);
}

TEST(HttpClientTest, ConnectionRefusedIsUnavailable) {
  uint16_t port = 0;
  {
    FrozenListener gone;  // a port that was just free
    port = static_cast<uint16_t>(std::stoi(gone.url("").substr(17)));
  }
  auto r = Fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/", {}, "",
                 std::chrono::seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

constexpr size_t kBig = 4u << 20;

// A server whose /slow handler takes 1.2 s, /brief 0.35 s; /big answers kBig bytes.
class SlowServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    server_ = std::make_unique<Server>(o, [](const Request& r) {
      if (r.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(1200));
      if (r.path == "/brief") std::this_thread::sleep_for(std::chrono::milliseconds(350));
      Response resp;
      resp.content_type = "text/plain";
      resp.body = r.path == "/big" ? std::string(kBig, 'b') : "done " + r.body;
      resp.headers.emplace_back("X-Answer", "final");
      return resp;
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + path;
  }
  std::unique_ptr<Server> server_;
};

// The interim answers the client asks for keep a slow handler's exchange alive past the progress
// timeout; the final answer is returned as usual.
TEST_F(SlowServerTest, InterimAnswersShowProgressOfASlowHandler) {
  FetchOptions o;
  o.timeout = std::chrono::seconds(20);
  o.progress_timeout = std::chrono::milliseconds(400);
  o.progress_interval = std::chrono::milliseconds(100);
  auto r = Fetch("POST", url("/slow"), {}, "x", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "done x");
  bool final_header = false;
  for (const auto& [k, v] : r->headers) final_header |= (k == "X-Answer" && v == "final");
  EXPECT_TRUE(final_header);
  EXPECT_GE(r->interim_answers, 5);
  // Keep-alive is unaffected: the same server answers a quick request next.
  auto quick = Fetch("GET", url("/quick"), {}, "", o);
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  EXPECT_EQ(quick->interim_answers, 0);
}

// A large answer (a segment file between nodes) is read in large pieces, not 512 bytes a read.
TEST_F(SlowServerTest, ALargeAnswerIsReadInLargePieces) {
  auto r = Fetch("GET", url("/big"), {}, "", FetchOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, std::string(kBig, 'b'));
  EXPECT_GE(r->reads, static_cast<int>(kBig / (64u << 10)));
  EXPECT_LE(r->reads, static_cast<int>(kBig / 2048))
      << "the answer came in pieces of " << kBig / r->reads << " bytes";
}

// Without interim answers the same slow handler is indistinguishable from a frozen server.
TEST_F(SlowServerTest, WithoutInterimAnswersASlowHandlerHitsTheProgressTimeout) {
  FetchOptions o;
  o.timeout = std::chrono::seconds(20);
  o.progress_timeout = std::chrono::milliseconds(400);
  auto r = Fetch("POST", url("/slow"), {}, "x", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

// The server sends 102 only when asked, only to HTTP/1.1 clients.
TEST_F(SlowServerTest, InterimAnswersOnlyWhenAsked) {
  auto raw = [this](const std::string& request) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    timeval tv{5, 0};
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
  };
  std::string asked = raw(
      "GET /brief HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-Sediment-Progress-Ms: 100\r\n\r\n");
  EXPECT_EQ(asked.rfind("HTTP/1.1 102 Processing\r\n\r\n", 0), 0u) << asked;
  EXPECT_NE(asked.find("HTTP/1.1 200"), std::string::npos) << asked;
  EXPECT_GT(asked.find("HTTP/1.1 200"), asked.rfind("102 Processing")) << asked;
  std::string plain = raw("GET /brief HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(plain.rfind("HTTP/1.1 200", 0), 0u) << plain;
  std::string old = raw("GET /brief HTTP/1.0\r\nHost: h\r\nX-Sediment-Progress-Ms: 100\r\n\r\n");
  EXPECT_EQ(old.find("102"), std::string::npos) << old;
  EXPECT_NE(old.find(" 200 "), std::string::npos) << old;
}

}  // namespace
}  // namespace sediment::http
