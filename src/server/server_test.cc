// The server's wiring: a real node (embedded commit log, a temporary data dir, a free port) serves
// the routes of every module, answers 404 for what no route matches and stops cleanly.
#include "server/server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/testing/temp_dir.h"
#include "http/http_client.h"

namespace sediment {
namespace {

class ServerWiringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config;
    config.data_dir = tmp_.Sub("data");
    config.listen = "127.0.0.1:0";
    config.ingest_tokens = {"web:ingest-token"};
    config.api_tokens = {"api-token"};
    config.cluster_secret = "secret";
    config.partitions = 2;
    server_ = std::make_unique<Server>(config);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override { server_->Stop(); }

  http::ClientResponse Call(const std::string& method, const std::string& path,
                            const std::string& token = "", const std::string& body = "") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    auto r = http::Fetch(method, "http://127.0.0.1:" + std::to_string(server_->port()) + path,
                         headers, body, std::chrono::seconds(30));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  TempDir tmp_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerWiringTest, EveryModulesRoutesAreServedAndTheRestIs404) {
  EXPECT_EQ(Call("GET", "/api/v1/nothing").status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/status").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/cluster").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/cluster/segments", "api-token").status, 200);
  EXPECT_EQ(Call("POST", "/internal/v1/query/cancel").status, 401);
  EXPECT_EQ(Call("GET", "/").status, 200);

  // Ingest, then the same event through the query route and a query job.
  auto ingest = Call("POST", "/api/v1/ingest/raw", "ingest-token", "hello wiring");
  EXPECT_EQ(ingest.status, 200) << ingest.body;
  // Acknowledged means in the commit log; the digest makes it searchable a moment later.
  http::ClientResponse query;
  for (int i = 0; i < 200; ++i) {
    query = Call("POST", "/api/v1/repositories/web/query", "api-token",
                 R"J({"queryString": "wiring | count()", "start": "1h"})J");
    if (query.status != 200 || query.body.find("\"_count\":\"1\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(query.status, 200) << query.body;
  EXPECT_NE(query.body.find("\"_count\":\"1\""), std::string::npos) << query.body;
  auto job = Call("POST", "/api/v1/repositories/web/queryjobs", "api-token",
                  R"({"queryString": "wiring", "start": "1h"})");
  EXPECT_EQ(job.status, 200) << job.body;
  EXPECT_NE(job.body.find("\"id\""), std::string::npos) << job.body;
}

TEST_F(ServerWiringTest, StopIsIdempotent) {
  server_->Stop();
  server_->Stop();
}

// A node whose listener speaks TLS calls its peers over HTTPS verified against --tls-ca: a CA
// bundle it cannot load stops the start (naming the flag and the file) before anything is
// created, rather than failing every peer call later.
TEST(ServerTlsTest, UnreadablePeerCaStopsTheStart) {
  TempDir tmp;
  ServerConfig config;
  config.data_dir = tmp.Sub("data");
  config.listen = "127.0.0.1:0";
  config.tls_cert_file = tmp.Sub("cert.pem");
  config.tls_key_file = tmp.Sub("key.pem");
  config.tls_ca_file = tmp.Sub("no-such-ca.pem");
  Server server(config);
  Status st = server.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("--tls-ca"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("no-such-ca.pem"), std::string::npos) << st.ToString();
  EXPECT_FALSE(Env::Default()->FileExists(config.data_dir));
  server.Stop();
}

}  // namespace
}  // namespace sediment
