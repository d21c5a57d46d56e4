// The client over TLS (https://): certificates made at test time with the `openssl` command (a
// test CA, a server certificate for localhost / 127.0.0.1, one for another host, and an unrelated
// CA), served by a small Asio TLS server in the test. Checked: a good certificate works (by IP and
// by name), an unknown CA and a wrong host name are refused with the reason, a plain HTTP server at
// an https:// URL fails cleanly, and the bounds (progress timeout, whole timeout, cancel) hold
// during the handshake and after it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "common/testing/temp_dir.h"
#include "http/frozen_listener_testing.h"
#include "http/http_client.h"
#include "http/http_server.h"

namespace sediment::http {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool Contains(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

// Makes, in `dir`: ca.pem (the test CA), server.pem/server.key (localhost, 127.0.0.1, signed by
// the CA), elsewhere.pem/elsewhere.key (elsewhere.test, 10.9.9.9, signed by the CA) and
// other-ca.pem (an unrelated CA). P-256 keys: a fraction of a second in all.
bool MakeCertificates(const std::string& dir) {
  {
    std::ofstream script(dir + "/make-certs.sh");
    script
        << "set -e\n"
           "ca() {\n"
           "  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\\n"
           "    -keyout $1.key -out $1.pem -days 2 -subj /CN=$1 \\\n"
           "    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign\n"
           "}\n"
           "leaf() {\n"
           "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\\n"
           "    -keyout $1.key -out $1.csr -subj /CN=$1\n"
           "  printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n' \"$2\" > $1.ext\n"
           "  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\\n"
           "    -extfile $1.ext -out $1.pem\n"
           "}\n"
           "ca ca\nca other-ca\n"
           "leaf server DNS:localhost,IP:127.0.0.1\n"
           "leaf elsewhere DNS:elsewhere.test,IP:10.9.9.9\n";
  }
  const std::string cmd = "cd '" + dir + "' && sh make-certs.sh > openssl.log 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// A TLS server on 127.0.0.1 serving one connection at a time on a thread of its own: each
// request is answered 200 "tls <method> <target> <body>" (Connection: close). With
// `answer = false` the request is read and never answered (a server frozen after the handshake).
class TlsServer {
 public:
  TlsServer(const std::string& cert, const std::string& key, bool answer = true)
      : ctx_(ssl::context::tls_server), acceptor_(ioc_), answer_(answer) {
    ctx_.use_certificate_chain_file(cert);
    ctx_.use_private_key_file(key, ssl::context::pem);
    tcp::endpoint at(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(at.protocol());
    acceptor_.bind(at);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~TlsServer() {
    stopping_ = true;
    boost::system::error_code ec;
    tcp::socket wake(ioc_);  // unblocks accept
    wake.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
  }
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& host, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(port_) + path;
  }
  int handshakes() const { return handshakes_.load(); }

 private:
  void Serve() {
    while (!stopping_) {
      boost::system::error_code ec;
      tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      if (ec || stopping_) continue;
      timeval tv{5, 0};  // a client that stalls cannot hold the test server
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ssl::stream<tcp::socket&> tls(socket, ctx_);
      tls.handshake(ssl::stream_base::server, ec);
      if (ec) continue;  // e.g. the client refused the certificate
      ++handshakes_;
      boost::beast::flat_buffer buffer;
      bhttp::request<bhttp::string_body> req;
      bhttp::read(tls, buffer, req, ec);
      if (ec) continue;
      if (!answer_) {
        while (!stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
      res.set(bhttp::field::connection, "close");
      res.body() = "tls " + std::string(req.method_string()) + " " + std::string(req.target()) +
                   " " + req.body();
      res.prepare_payload();
      bhttp::write(tls, res, ec);
      tls.shutdown(ec);
    }
  }

  net::io_context ioc_;
  ssl::context ctx_;
  tcp::acceptor acceptor_;
  const bool answer_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> handshakes_{0};
  std::thread thread_;
};

class HttpClientTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("http_tls_test");
    made_ = MakeCertificates(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(made_) << "openssl failed; see " << dir_->Sub("openssl.log");
  }
  static std::string File(const std::string& name) { return dir_->Sub(name); }
  static FetchOptions Trusting(const std::string& ca) {
    FetchOptions o;
    o.timeout = std::chrono::seconds(10);
    o.ca_file = File(ca);
    return o;
  }

  static TempDir* dir_;
  static bool made_;
};

TempDir* HttpClientTlsTest::dir_ = nullptr;
bool HttpClientTlsTest::made_ = false;

TEST_F(HttpClientTlsTest, GoodCertificateWorksByIpAndByName) {
  TlsServer server(File("server.pem"), File("server.key"));
  auto r = Fetch("POST", server.url("127.0.0.1", "/api/v1/x?y=1"), {}, "body", Trusting("ca.pem"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "tls POST /api/v1/x?y=1 body");
  // By name: SNI and the DNS name are checked ("localhost" may resolve to ::1 first, where
  // nothing listens; the next address is tried).
  auto named = Fetch("GET", server.url("localhost", "/"), {}, "", Trusting("ca.pem"));
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->body, "tls GET / ");
  EXPECT_EQ(server.handshakes(), 2);
}

TEST_F(HttpClientTlsTest, CertificateOfAnotherCaIsRefused) {
  TlsServer server(File("server.pem"), File("server.key"));
  auto r = Fetch("GET", server.url("127.0.0.1", "/"), {}, "", Trusting("other-ca.pem"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "is not trusted: unable to get local issuer certificate"))
      << r.status().ToString();
  // The system's CAs do not know the test CA either.
  FetchOptions system;
  system.timeout = std::chrono::seconds(10);
  auto s = Fetch("GET", server.url("127.0.0.1", "/"), {}, "", system);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
  EXPECT_TRUE(Contains(s.status(), "is not trusted")) << s.status().ToString();
  EXPECT_EQ(server.handshakes(), 0);
}

TEST_F(HttpClientTlsTest, CertificateForAnotherHostIsRefused) {
  TlsServer server(File("elsewhere.pem"), File("elsewhere.key"));
  auto by_ip = Fetch("GET", server.url("127.0.0.1", "/"), {}, "", Trusting("ca.pem"));
  ASSERT_FALSE(by_ip.ok());
  EXPECT_EQ(by_ip.status().code(), StatusCode::kUnavailable) << by_ip.status().ToString();
  EXPECT_TRUE(Contains(by_ip.status(), "is not trusted: IP address mismatch"))
      << by_ip.status().ToString();
  auto by_name = Fetch("GET", server.url("localhost", "/"), {}, "", Trusting("ca.pem"));
  ASSERT_FALSE(by_name.ok());
  EXPECT_EQ(by_name.status().code(), StatusCode::kUnavailable) << by_name.status().ToString();
  EXPECT_TRUE(Contains(by_name.status(), "is not trusted: hostname mismatch"))
      << by_name.status().ToString();
  EXPECT_EQ(server.handshakes(), 0);
  // Without the host check the chain alone is verified.
  FetchOptions o = Trusting("ca.pem");
  o.verify_host = false;
  auto unchecked = Fetch("GET", server.url("127.0.0.1", "/"), {}, "", o);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_EQ(unchecked->status, 200);
}

TEST_F(HttpClientTlsTest, PlainHttpServerAtAnHttpsUrlFailsCleanly) {
  ServerOptions so;
  so.port = 0;
  Server plain(so, [](const Request&) {
    Response resp;
    resp.body = "plain";
    return resp;
  });
  ASSERT_TRUE(plain.Start().ok());
  const std::string hostport = "127.0.0.1:" + std::to_string(plain.port());
  auto t0 = Clock::now();
  auto r = Fetch("GET", "https://" + hostport + "/", {}, "", Trusting("ca.pem"));
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "TLS handshake with " + hostport + " failed"))
      << r.status().ToString();
  EXPECT_LT(took, 3.0);
  // The server is unharmed.
  auto ok = Fetch("GET", "http://" + hostport + "/", {}, "", std::chrono::seconds(5));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->body, "plain");
  plain.Stop();
}

TEST_F(HttpClientTlsTest, UnreadableCaFileIsInvalidArgument) {
  TlsServer server(File("server.pem"), File("server.key"));
  auto r = Fetch("GET", server.url("127.0.0.1", "/"), {}, "", Trusting("no-such-ca.pem"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "no-such-ca.pem")) << r.status().ToString();
}

TEST_F(HttpClientTlsTest, FrozenHandshakeIsGivenUpAfterTheProgressTimeout) {
  testing::FrozenListener frozen;  // the TLS handshake is never answered
  FetchOptions o = Trusting("ca.pem");
  o.timeout = std::chrono::seconds(20);
  o.progress_timeout = std::chrono::milliseconds(300);
  auto t0 = Clock::now();
  auto r = Fetch("GET", frozen.url("/", "https"), {}, "", o);
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "300 ms (progress timeout)")) << r.status().ToString();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 3.0);
}

TEST_F(HttpClientTlsTest, FrozenHandshakeIsBoundedByTheWholeTimeout) {
  testing::FrozenListener frozen;  // the TLS handshake is never answered
  FetchOptions o = Trusting("ca.pem");
  o.timeout = std::chrono::seconds(1);
  auto t0 = Clock::now();
  auto r = Fetch("GET", frozen.url("/", "https"), {}, "", o);
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "no complete answer within 1000 ms")) << r.status().ToString();
  EXPECT_GE(took, 0.99);
  EXPECT_LT(took, 4.0);
}

TEST_F(HttpClientTlsTest, CancelAbandonsAFrozenHandshake) {
  testing::FrozenListener frozen;  // the TLS handshake is never answered
  std::atomic<bool> cancel{false};
  FetchOptions o = Trusting("ca.pem");
  o.timeout = std::chrono::seconds(20);
  o.cancel = &cancel;
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  auto t0 = Clock::now();
  auto r = Fetch("GET", frozen.url("/", "https"), {}, "", o);
  const double took = SecondsSince(t0);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 1.5);
}

// After the handshake: a server that reads the request and never answers is given up after the
// progress timeout, as over plain HTTP.
TEST_F(HttpClientTlsTest, ServerFrozenAfterTheHandshakeHitsTheProgressTimeout) {
  TlsServer server(File("server.pem"), File("server.key"), /*answer=*/false);
  FetchOptions o = Trusting("ca.pem");
  o.timeout = std::chrono::seconds(20);
  o.progress_timeout = std::chrono::milliseconds(400);
  auto t0 = Clock::now();
  auto r = Fetch("POST", server.url("127.0.0.1", "/internal/v1/query/partial"), {}, "{}", o);
  const double took = SecondsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status(), "400 ms (progress timeout)")) << r.status().ToString();
  EXPECT_EQ(server.handshakes(), 1);
  EXPECT_GE(took, 0.39);
  EXPECT_LT(took, 3.0);
}

TEST(PeerTlsTest, SchemeAndCaFollowTheListener) {
  PeerTls plain;
  EXPECT_EQ(plain.Url("10.0.0.2:8080", "/internal/v1/x?a=b"),
            "http://10.0.0.2:8080/internal/v1/x?a=b");
  PeerTls tls{true, "/etc/sediment/ca.pem"};
  EXPECT_EQ(tls.Url("[::1]:9", "/p"), "https://[::1]:9/p");
  FetchOptions base;
  base.timeout = std::chrono::seconds(7);
  base.verify_host = false;
  FetchOptions o = tls.Options(base);
  EXPECT_EQ(o.ca_file, "/etc/sediment/ca.pem");
  EXPECT_TRUE(o.verify_host);
  EXPECT_EQ(o.timeout, std::chrono::seconds(7));
}

}  // namespace
}  // namespace sediment::http
