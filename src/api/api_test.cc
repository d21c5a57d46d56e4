// The API's routing and the checks that answer before any part of the node is asked: the routes
// are registered on a node whose parts are all absent, so a request that reached a part would
// crash the test.
#include <gtest/gtest.h>

#include "api/node.h"
#include "api/routes.h"

namespace sediment::api {
namespace {

class ApiRoutingTest : public ::testing::Test {
 protected:
  ApiRoutingTest() {
    Node node;
    node.config.cluster_secret = "s3cret";  // Global is never asked for it
    AddRoutes(router_, node);
  }
  std::optional<http::Response> Send(const std::string& method, const std::string& path,
                                     const std::string& token = "") {
    http::Request req;
    req.method = method;
    req.path = path;
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    return router_.Dispatch(req);
  }

  http::Router router_;
};

TEST_F(ApiRoutingTest, UnknownPathsAreNotRouted) {
  EXPECT_FALSE(Send("GET", "/api/v1/nothing").has_value());
  EXPECT_FALSE(Send("POST", "/api/v1/repositories/web/query/extra").has_value());
}

TEST_F(ApiRoutingTest, AWrongMethodIs405NamingTheAllowedOnes) {
  auto r = Send("GET", "/api/v1/ingest/humio-structured");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
  bool allow = false;
  for (const auto& [k, v] : r->headers) allow |= k == "Allow" && v == "POST";
  EXPECT_TRUE(allow);
  r = Send("DELETE", "/api/v1/repositories/web/retention");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
}

TEST_F(ApiRoutingTest, InternalRoutesNeedTheClusterSecret) {
  for (const char* path : {"/internal/v1/query/buffers", "/internal/v1/query/segments",
                           "/internal/v1/query/partial", "/internal/v1/query/cancel"}) {
    auto r = Send("POST", path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 401) << path;
    r = Send("POST", path, "wrong");
    EXPECT_EQ(r->status, 401) << path;
  }
  auto r = Send("GET", "/internal/v1/segment-file");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
}

TEST_F(ApiRoutingTest, IngestAndQueryWithoutATokenAre401) {
  for (const char* path :
       {"/api/v1/ingest/humio-structured", "/api/v1/ingest/raw", "/api/v1/repositories/web/query",
        "/api/v1/dataspaces/web/query", "/api/v1/repositories/web/queryjobs"}) {
    auto r = Send("POST", path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 401) << path;
  }
  auto r = Send("POST", "/services/collector/event");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("\"code\":2"), std::string::npos) << r->body;  // Splunk's code
}

TEST_F(ApiRoutingTest, TheIndexListsThePublicRoutesOnly) {
  auto r = Send("GET", "/");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("POST /api/v1/ingest/humio-structured"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("GET /api/v1/status"), std::string::npos);
  EXPECT_NE(r->body.find("POST /api/v1/repositories/{repo}/query"), std::string::npos);
  EXPECT_EQ(r->body.find("/internal/"), std::string::npos);
}

}  // namespace
}  // namespace sediment::api
