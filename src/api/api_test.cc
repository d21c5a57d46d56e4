// The API's routing and the checks that answer before any part of the node is asked: the routes
// are registered on a node whose parts are all absent, so a request that reached a part would
// crash the test.
#include <gtest/gtest.h>

#include "api/lookup_files.h"
#include "api/node.h"
#include "api/routes.h"
#include "webui/assets.h"

namespace sediment::api {
namespace {

using metrics::Counter;

class ApiRoutingTest : public ::testing::Test {
 protected:
  ApiRoutingTest() {
    node_.config.cluster_secret = "s3cret";  // Global is never asked for it
    AddRoutes(router_, node_);
  }
  std::optional<http::Response> Send(const std::string& method, const std::string& path,
                                     const std::string& token = "") {
    http::Request req;
    req.method = method;
    req.path = path;
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    return router_.Dispatch(req);
  }

  Node node_;
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
        "/api/v1/dataspaces/web/query", "/api/v1/repositories/web/queryjobs",
        "/api/v1/ingest/otlp/v1/logs", "/v1/logs"}) {
    auto r = Send("POST", path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 401) << path;
  }
  auto r = Send("POST", "/services/collector/event");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("\"code\":2"), std::string::npos) << r->body;  // Splunk's code
}

TEST_F(ApiRoutingTest, MetricsNeedAnApiTokenOrAnAllowedAddress) {
  auto r = Send("GET", "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("--metrics-allow"), std::string::npos) << r->body;
  r = Send("GET", "/metrics", "unknown");
  EXPECT_EQ(r->status, 401);

  Node node;
  node.config.metrics_allow = {"10.0.0.0/8", "fd00::/8"};
  http::Router router;
  AddRoutes(router, node);
  http::Request req;
  req.method = "GET";
  req.path = "/metrics";
  for (const char* inside : {"10.1.2.3:5555", "[fd00::1]:80"}) {
    req.remote = inside;
    EXPECT_FALSE(router.Admit(req).has_value()) << inside;  // admitted without a token
  }
  for (const char* outside : {"192.168.0.1:5555", "127.0.0.1:1", "[fe80::1]:80", ""}) {
    req.remote = outside;
    auto refused = router.Admit(req);
    ASSERT_TRUE(refused.has_value()) << outside;
    EXPECT_EQ(refused->status, 401) << outside;
  }
}

// An ingest request refused by its route's gate is counted under its route and status.
TEST_F(ApiRoutingTest, RefusedIngestRequestsAreCounted) {
  Counter& c = node_.metrics->ingest_requests.With({"/api/v1/ingest/raw", "401"});
  EXPECT_EQ(c.Value(), 0u);
  auto r = Send("POST", "/api/v1/ingest/raw");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(c.Value(), 1u);
  EXPECT_EQ(node_.metrics->ingest_requests.With({"/api/v1/ingest/raw", "200"}).Value(), 0u);
}

// Every /internal/ route accepts the cluster secret only: any other bearer (an API token) is
// refused by the route's gate, from the header alone (Admit, before a body is read).
TEST_F(ApiRoutingTest, EveryInternalRouteRefusesAnythingButTheClusterSecret) {
  int internal = 0;
  for (const std::string& route : router_.Describe()) {
    const auto space = route.find(' ');
    std::string path = route.substr(space + 1);
    if (path.rfind("/internal/", 0) != 0) continue;
    ++internal;
    const std::string method = route.substr(0, route.find_first_of(" |"));
    for (const std::string token : {"", "api-token", "s3cre", "s3cret2"}) {
      http::Request req;
      req.method = method;
      req.path = path;
      if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
      auto refused = router_.Admit(req);
      ASSERT_TRUE(refused.has_value()) << route << " " << token;
      EXPECT_EQ(refused->status, 401) << route;
      EXPECT_EQ(router_.Dispatch(req)->status, 401) << route;
    }
  }
  EXPECT_EQ(internal, 6);  // 4 query, the snapshot, the segment file
}

TEST_F(ApiRoutingTest, StatusAndClusterNeedAnApiToken) {
  for (const char* path : {"/api/v1/status", "/api/v1/cluster", "/api/v1/cluster/segments",
                           "/api/v1/repositories/web/retention"}) {
    auto r = Send("GET", path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_NE(r->body.find("missing API token"), std::string::npos) << r->body;
  }
}

TEST_F(ApiRoutingTest, IngestIsRefusedBeforeItsBody) {
  http::Request req;
  req.method = "POST";
  req.path = "/api/v1/ingest/raw";
  req.headers = {{"Content-Length", "33554432"}};
  auto r = router_.Admit(req);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 401);
  req.path = "/services/collector/raw";
  req.headers.emplace_back("Authorization", "Splunk nope");
  r = router_.Admit(req);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("\"code\":4"), std::string::npos) << r->body;
}

TEST_F(ApiRoutingTest, ManagementRoutesNeedAnApiToken) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/whoami"},
           {"GET", "/api/v1/repositories"},
           {"POST", "/api/v1/repositories"},
           {"DELETE", "/api/v1/repositories/web"},
           {"GET", "/api/v1/repositories/web/ingest-tokens"},
           {"POST", "/api/v1/repositories/web/ingest-tokens"},
           {"DELETE", "/api/v1/repositories/web/ingest-tokens/n"},
           {"GET", "/api/v1/tokens"},
           {"POST", "/api/v1/tokens"},
           {"DELETE", "/api/v1/tokens/n"}}) {
    auto r = Send(method, path);
    ASSERT_TRUE(r.has_value()) << method << " " << path;
    EXPECT_EQ(r->status, 401) << method << " " << path;
    // No token lookup is possible on this node (no parts): a token is unknown.
    r = Send(method, path, "some-token");
    ASSERT_TRUE(r.has_value()) << method << " " << path;
    EXPECT_EQ(r->status, 401) << method << " " << path;
    EXPECT_NE(r->body.find("unknown API token"), std::string::npos) << r->body;
  }
}

TEST(Permissions, PolicyOfGrantsAndAdmin) {
  const ApiPrincipal admin{kStartupTokenName, true, {}, ""};
  const ApiPrincipal reader{
      "r", false, {{"web", kPermRead}, {"db", kPermIngest | kPermManage}}, ""};
  for (Permission p :
       {Permission::kRead, Permission::kIngest, Permission::kManage, Permission::kAdmin}) {
    EXPECT_TRUE(Allows(admin, p, "anything")) << PermissionName(p);
  }
  EXPECT_TRUE(Allows(reader, Permission::kRead, "web"));
  EXPECT_FALSE(Allows(reader, Permission::kIngest, "web"));
  EXPECT_FALSE(Allows(reader, Permission::kManage, "web"));
  EXPECT_FALSE(Allows(reader, Permission::kRead, "db"));  // manage does not imply read
  EXPECT_TRUE(Allows(reader, Permission::kIngest, "db"));
  EXPECT_TRUE(Allows(reader, Permission::kManage, "db"));
  EXPECT_FALSE(Allows(reader, Permission::kRead, "other"));
  EXPECT_FALSE(Allows(reader, Permission::kAdmin, "web"));
  EXPECT_FALSE(Allows(reader, Permission::kRead, ""));
  http::Response f = Forbidden(reader, Permission::kRead, "other");
  EXPECT_EQ(f.status, 403);
  EXPECT_NE(f.body.find("'r' lacks the read permission on repository 'other'"), std::string::npos)
      << f.body;
  f = Forbidden(reader, Permission::kAdmin, "");
  EXPECT_EQ(f.status, 403);
  EXPECT_NE(f.body.find("admin"), std::string::npos) << f.body;
  EXPECT_EQ(PermissionBit("read"), kPermRead);
  EXPECT_EQ(PermissionBit("ingest"), kPermIngest);
  EXPECT_EQ(PermissionBit("manage"), kPermManage);
  EXPECT_EQ(PermissionBit("admin"), std::nullopt);
  EXPECT_EQ(PermissionBit("Read"), std::nullopt);
  EXPECT_EQ(PermissionNames(kPermAll), (std::vector<std::string>{"read", "ingest", "manage"}));
  EXPECT_EQ(PermissionNames(kPermManage), (std::vector<std::string>{"manage"}));
}

// Unauthenticated, up or down only (this node has no parts: down).
TEST_F(ApiRoutingTest, HealthAnswersWithoutAToken) {
  auto r = Send("GET", "/api/v1/health");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, R"({"status":"DOWN"})");
  r = Send("GET", "/services/collector/health");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, R"({"text":"HEC is unhealthy","code":18})");
  http::Request up;
  up.path = "/services/collector/health";
  EXPECT_EQ(HealthAnswer(up, true)->body, R"({"text":"HEC is healthy","code":17})");
  up.path = "/api/v1/health";
  EXPECT_EQ(HealthAnswer(up, true)->body, R"({"status":"OK"})");
  EXPECT_EQ(HealthAnswer(up, true)->status, 200);
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

// Browsers get the UI at / and its page paths; its files under /assets/ with their content type
// and cache headers; the route index stays at /api/v1 (and at / for non-browsers).
TEST_F(ApiRoutingTest, WebUiPagesAssetsAndTheIndex) {
  auto header = [](const http::Response& r, std::string_view name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return std::string();
  };
  http::Request browser;
  browser.method = "GET";
  browser.headers.emplace_back("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
  for (const char* path : {"/", "/search", "/cluster", "/repositories"}) {
    browser.path = path;
    auto r = router_.Dispatch(browser);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->content_type, "text/html; charset=utf-8") << path;
    EXPECT_EQ(r->body, webui::IndexHtml().body) << path;
    EXPECT_EQ(header(*r, "Cache-Control"), "no-cache") << path;
  }
  int assets = 0;
  for (const webui::Asset& a : webui::Assets()) {
    if (a.name == "index.html") continue;
    ++assets;
    auto r = Send("GET", "/assets/" + std::string(a.name));
    ASSERT_TRUE(r.has_value()) << a.name;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->content_type, a.content_type);
    EXPECT_EQ(r->body, a.body);
    EXPECT_EQ(header(*r, "Cache-Control"), "public, max-age=31536000, immutable");
    EXPECT_EQ(header(*r, "ETag"), a.etag);
    http::Request again;
    again.method = "GET";
    again.path = "/assets/" + std::string(a.name);
    again.headers.emplace_back("If-None-Match", std::string(a.etag));
    auto cached = router_.Dispatch(again);
    EXPECT_EQ(cached->status, 304);
    EXPECT_TRUE(cached->body.empty());
  }
  EXPECT_EQ(assets, 2);
  for (const char* path : {"/assets/nope.js", "/assets/index.html"}) {
    auto r = Send("GET", path);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_NE(r->body.find("no such UI file"), std::string::npos) << r->body;
  }
  auto index = Send("GET", "/api/v1");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->content_type, "text/plain");
  EXPECT_NE(index->body.find("POST /api/v1/repositories/{repo}/query"), std::string::npos);
  EXPECT_EQ(index->body.find("/assets/"), std::string::npos);
}

TEST_F(ApiRoutingTest, LookupFileRoutesNeedAnApiToken) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/api/v1/repositories/web/files"},
           {"GET", "/api/v1/repositories/web/files"},
           {"GET", "/api/v1/repositories/web/files/users.csv"},
           {"DELETE", "/api/v1/dataspaces/web/files/users.csv"}}) {
    auto r = Send(method, path);
    ASSERT_TRUE(r.has_value()) << method << " " << path;
    EXPECT_EQ(r->status, 401) << method << " " << path;
  }
  auto r = Send("PUT", "/api/v1/repositories/web/files/users.csv");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
}

const std::map<std::string, std::string> kNoQuery;

TEST(LookupUpload, MultipartFilePartAsCurlSendsIt) {
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\nignored\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dir/users.csv\"\r\n"
      "Content-Type: text/csv\r\n\r\nuserid,name\r\n1,chr\n\r\n--XyZ--\r\n";
  auto up = ParseLookupUpload("multipart/form-data; boundary=XyZ", body, kNoQuery);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->name, "users.csv");  // the last component of the filename
  EXPECT_EQ(up->content, "userid,name\r\n1,chr\n");
  // A quoted boundary; ?name= overrides the filename.
  auto renamed =
      ParseLookupUpload("Multipart/Form-Data; boundary=\"XyZ\"", body, {{"name", "other.csv"}});
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  EXPECT_EQ(renamed->name, "other.csv");
  EXPECT_EQ(renamed->content, up->content);
}

TEST(LookupUpload, RawBodyTakesTheNameFromTheQuery) {
  auto up = ParseLookupUpload("text/csv", "a,b\n1,2\n", {{"name", "t.csv"}});
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->name, "t.csv");
  EXPECT_EQ(up->content, "a,b\n1,2\n");
  EXPECT_EQ(ParseLookupUpload("text/csv", "a,b\n", kNoQuery).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(LookupUpload, MalformedMultipartIsInvalidArgument) {
  const std::string part =
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\nx,y\r\n";
  for (const auto& [ct, body] : std::vector<std::pair<std::string, std::string>>{
           {"multipart/form-data", part + "--b--"},              // no boundary
           {"multipart/form-data; boundary=b", "no delimiter"},  // no boundary in the body
           {"multipart/form-data; boundary=b", part},            // unterminated part
           {"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data"},
           {"multipart/form-data; boundary=b",  // no part named file
            "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b--"}}) {
    EXPECT_EQ(ParseLookupUpload(ct, body, kNoQuery).status().code(), StatusCode::kInvalidArgument)
        << body;
  }
  EXPECT_TRUE(ParseLookupUpload("multipart/form-data; boundary=b", part + "--b--", kNoQuery).ok());
}

TEST(LookupUpload, ContentChecks) {
  EXPECT_TRUE(CheckLookupFile("users.csv", "userid,name\n1,chr\n").ok());
  EXPECT_TRUE(CheckLookupFile("USERS.CSV", "userid\n").ok());
  EXPECT_TRUE(CheckLookupFile("ids.json", R"({"1": {"name": "chr"}})").ok());
  EXPECT_TRUE(CheckLookupFile("ids.json", R"([{"userid": "1"}])").ok());
  EXPECT_TRUE(CheckLookupFile("big.csv", "a\n" + std::string(kMaxLookupFileBytes - 2, 'x')).ok());
  EXPECT_EQ(CheckLookupFile("big.csv", "a\n" + std::string(kMaxLookupFileBytes - 1, 'x')).code(),
            StatusCode::kTooLarge);
  for (const auto& [name, content] : std::vector<std::pair<std::string, std::string>>{
           {"users.txt", "a\n"},         // neither .csv nor .json
           {"a/b.csv", "a\n"},           // not a valid name
           {"users.csv", ""},            // no header
           {"users.csv", "\n1,2\n"},     // empty header
           {"users.csv", "a\xff\n"},     // not UTF-8
           {"ids.json", "12"},           // not an object or array
           {"ids.json", "{\"a\": "}}) {  // not JSON
    EXPECT_EQ(CheckLookupFile(name, content).code(), StatusCode::kInvalidArgument) << name;
  }
}

// Elastic routes refuse without an ingest token in Elastic's shape, before the body; GET / answers
// Elastic clients with the info document and everyone else with the route index.
TEST_F(ApiRoutingTest, ElasticRoutesAndTheRootDocument) {
  for (const char* path : {"/_bulk", "/web/_bulk", "/api/v1/ingest/elastic-bulk", "/_license"}) {
    http::Request req;
    req.method = std::string(path) == "/_license" ? "GET" : "POST";
    req.path = path;
    req.headers.emplace_back("Authorization", "Basic dXNlcjpub3Bl");  // user:nope
    auto refused = router_.Admit(req);
    ASSERT_TRUE(refused.has_value()) << path;
    EXPECT_EQ(refused->status, 401) << path;
    EXPECT_NE(refused->body.find("security_exception"), std::string::npos) << refused->body;
  }
  http::Request plain;
  plain.method = "GET";
  plain.path = "/";
  auto index = router_.Dispatch(plain);
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->content_type, "text/plain");
  EXPECT_NE(index->body.find("POST|PUT /_bulk"), std::string::npos) << index->body;

  http::Request es = plain;
  es.headers.emplace_back("Accept", "application/vnd.elasticsearch+json; compatible-with=8");
  auto info = router_.Dispatch(es);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->status, 200);
  EXPECT_EQ(info->content_type, "application/vnd.elasticsearch+json;compatible-with=8");
  EXPECT_NE(info->body.find("\"number\":\"8.17.0\""), std::string::npos) << info->body;
  bool product = false;
  for (const auto& [k, v] : info->headers)
    product |= k == "X-Elastic-Product" && v == "Elasticsearch";
  EXPECT_TRUE(product);
  es.headers.emplace_back("Authorization", "Basic dXNlcjpub3Bl");
  EXPECT_EQ(router_.Dispatch(es)->status, 401);  // credentials that are no ingest token
}

TEST(ElasticTokensTest, BasicApiKeyBearer) {
  http::Request req;
  req.headers.emplace_back("Authorization", "Basic YW55OnRvay1lbg==");  // any:tok-en
  EXPECT_EQ(ElasticTokens(req), std::vector<std::string>{"tok-en"});
  req.headers[0].second = "ApiKey aWQ6a2V5";  // id:key
  EXPECT_EQ(ElasticTokens(req), (std::vector<std::string>{"aWQ6a2V5", "key"}));
  req.headers[0].second = "Bearer abc";
  EXPECT_EQ(ElasticTokens(req), std::vector<std::string>{"abc"});
  req.headers[0].second = "Basic bm9jb2xvbg==";  // "nocolon"
  EXPECT_TRUE(ElasticTokens(req).empty());
  req.headers[0].second = "Basic !!!";
  EXPECT_TRUE(ElasticTokens(req).empty());
}

}  // namespace
}  // namespace sediment::api
