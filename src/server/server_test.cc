// The server's wiring: a real node (embedded commit log, a temporary data dir, a free port) serves
// the routes of every module, answers 404 for what no route matches and stops cleanly.
#include "server/server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/testing/temp_dir.h"
#include "http/http_client.h"
#include "log/local_log.h"

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
  for (const char* path : {"/api/v1/status", "/api/v1/cluster", "/api/v1/cluster/segments"}) {
    EXPECT_EQ(Call("GET", path).status, 401) << path;
    EXPECT_EQ(Call("GET", path, "ingest-token").status, 401) << path;
    EXPECT_EQ(Call("GET", path, "api-token").status, 200) << path;
  }
  EXPECT_EQ(Call("GET", "/api/v1/health").status, 200);
  EXPECT_EQ(Call("GET", "/services/collector/health").body,
            R"({"text":"HEC is healthy","code":17})");
  EXPECT_EQ(Call("POST", "/internal/v1/query/cancel").status, 401);
  EXPECT_EQ(Call("GET", "/internal/v1/global/snapshot", "api-token").status, 401);
  EXPECT_EQ(Call("GET", "/internal/v1/global/snapshot", "secret").status, 200);
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

// Global keeps only a verifier of the cluster secret: a node given another secret, or none, on
// this cluster refuses to start, naming the flag.
TEST_F(ServerWiringTest, ANodeWithoutTheClusterSecretRefusesToStart) {
  server_->Stop();
  for (const std::string secret : {"other", ""}) {
    ServerConfig config;
    config.data_dir = tmp_.Sub("data");
    config.listen = "127.0.0.1:0";
    config.cluster_secret = secret;
    config.partitions = 2;
    Server again(config);
    Status st = again.Start();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("--cluster-secret"), std::string::npos) << st.ToString();
    again.Stop();
  }
  ServerConfig config;
  config.data_dir = tmp_.Sub("data");
  config.listen = "127.0.0.1:0";
  config.cluster_secret = "secret";
  config.partitions = 2;
  Server same(config);
  Status st = same.Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  same.Stop();
}

// A data dir of an earlier release: its global log holds the cluster secret and the tokens in
// clear (event version 1). The node starts without --cluster-secret, moves the secret to its
// cluster-secret file, and the old tokens still work (hashed when applied).
TEST(ServerUpgrade, ClearSecretsOfAnEarlierReleaseAreHashedAndTheSecretMovesToItsFile) {
  TempDir tmp;
  const std::string data = tmp.Sub("data");
  {
    auto log = OpenLocalLog(Env::Default(), JoinPath(data, "log/global"),
                            LocalLogOptions{.partitions = 1});
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto record = [](uint8_t type, std::vector<std::string> fields) {
      std::string r("GE\x01", 3);
      r.push_back(static_cast<char>(type));
      for (const auto& f : fields) PutLengthPrefixed(&r, f);
      PutFixed32(&r, Crc32c(r));
      return r;
    };
    for (std::string r :
         {record(1, {"old-cluster"}), record(10, {"old-cluster-secret"}), record(2, {"web"}),
          record(3, {"web", "old-ingest"}), record(4, {"old-api"})}) {
      ASSERT_TRUE((*log)->Append(PartitionId(0), std::move(r)).get().ok());
    }
  }
  ServerConfig config;
  config.data_dir = data;
  config.listen = "127.0.0.1:0";
  config.partitions = 2;
  Server server(config);
  Status st = server.Start();
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto secret = Env::Default()->ReadFile(JoinPath(data, "cluster-secret"));
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(*secret, "old-cluster-secret\n");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto call = [&](const std::string& method, const std::string& path, const std::string& token) {
    auto r = http::Fetch(method, url + path, {{"Authorization", "Bearer " + token}}, "upgraded",
                         std::chrono::seconds(30));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->status : 0;
  };
  EXPECT_EQ(call("POST", "/api/v1/ingest/raw", "old-ingest"), 200);
  EXPECT_EQ(call("GET", "/api/v1/status", "old-api"), 200);
  EXPECT_EQ(call("GET", "/internal/v1/global/snapshot", "old-cluster-secret"), 200);
  EXPECT_EQ(call("GET", "/internal/v1/global/snapshot", "old-api"), 401);
  server.Stop();
  // Its new snapshot holds no secret in clear; a restart finds the secret in the file.
  auto names = Env::Default()->ListDir(JoinPath(data, "global-snapshots"));
  ASSERT_TRUE(names.ok());
  ASSERT_FALSE(names->empty());
  for (const std::string& name : names.value()) {
    auto bytes = Env::Default()->ReadFile(JoinPath(JoinPath(data, "global-snapshots"), name));
    ASSERT_TRUE(bytes.ok());
    for (const char* clear : {"old-cluster-secret", "old-ingest", "old-api"}) {
      EXPECT_EQ(bytes->find(clear), std::string::npos) << name << ": " << clear;
    }
  }
  Server again(config);
  st = again.Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  again.Stop();
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
