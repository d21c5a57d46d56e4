#include "http/router.h"

#include <gtest/gtest.h>

namespace sediment::http {
namespace {

Request Req(std::string method, std::string path) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

// Answers 200 with "<name>" and the parameters as "k=v;" in the body.
RouteHandler Named(std::string name) {
  return [name](const Request&, const PathParams& params) {
    Response r;
    r.body = name;
    for (const auto& [k, v] : params) r.body += " " + k + "=" + v;
    return r;
  };
}

class RouterTest : public ::testing::Test {
 protected:
  RouterTest() {
    router_.Add("POST", "/api/v1/ingest/raw", Named("raw"));
    router_.Add("GET", "/api/v1/status", Named("status"));
    router_.Add("POST", "/api/v1/repositories/{repo}/query", Named("query"));
    router_.Add("*", "/api/v1/repositories/{repo}/queryjobs/{id}", Named("job"));
    router_.Add("PUT|GET", "/api/v1/repositories/{repo}/retention", Named("retention"));
    router_.Add("GET", "/", Named("index"));
  }
  std::string Body(const std::string& method, const std::string& path) {
    auto r = router_.Dispatch(Req(method, path));
    if (!r) return "<none>";
    return std::to_string(r->status) + " " + r->body;
  }
  Router router_;
};

TEST_F(RouterTest, ExactPathsAndParameters) {
  EXPECT_EQ(Body("POST", "/api/v1/ingest/raw"), "200 raw");
  EXPECT_EQ(Body("GET", "/api/v1/status"), "200 status");
  EXPECT_EQ(Body("POST", "/api/v1/repositories/web/query"), "200 query repo=web");
  EXPECT_EQ(Body("DELETE", "/api/v1/repositories/web/queryjobs/ab12"), "200 job id=ab12 repo=web");
  EXPECT_EQ(Body("GET", "/"), "200 index");
}

TEST_F(RouterTest, NothingMatchesOtherPaths) {
  EXPECT_EQ(Body("GET", "/api/v1/statusx"), "<none>");
  EXPECT_EQ(Body("GET", "/api/v1/status/"), "<none>");               // trailing segment
  EXPECT_EQ(Body("POST", "/api/v1/repositories//query"), "<none>");  // empty parameter
  EXPECT_EQ(Body("POST", "/api/v1/repositories/a/b/query"), "<none>");
  EXPECT_EQ(Body("GET", "/api/v1/repositories/web/queryjobs/"), "<none>");
  EXPECT_EQ(Body("GET", ""), "<none>");
}

TEST_F(RouterTest, AKnownPathWithAnotherMethodIs405NamingTheMethods) {
  auto r = router_.Dispatch(Req("GET", "/api/v1/ingest/raw"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
  EXPECT_NE(r->body.find("use POST for /api/v1/ingest/raw"), std::string::npos) << r->body;
  ASSERT_EQ(r->headers.size(), 1u);
  EXPECT_EQ(r->headers[0], (std::pair<std::string, std::string>{"Allow", "POST"}));
  r = router_.Dispatch(Req("DELETE", "/api/v1/repositories/web/retention"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
  EXPECT_NE(r->body.find("use PUT or GET for"), std::string::npos) << r->body;
  EXPECT_EQ(r->headers[0].second, "PUT, GET");
}

TEST_F(RouterTest, TheFirstMatchingRouteWins) {
  router_.Add("GET", "/api/v1/status", Named("second"));
  router_.Add("POST", "/api/v1/status", Named("post"));
  EXPECT_EQ(Body("GET", "/api/v1/status"), "200 status");
  EXPECT_EQ(Body("POST", "/api/v1/status"), "200 post");
}

TEST_F(RouterTest, DescribeListsRoutesInOrder) {
  auto d = router_.Describe();
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d[0], "POST /api/v1/ingest/raw");
  EXPECT_EQ(d[4], "PUT|GET /api/v1/repositories/{repo}/retention");
}

// Admits requests whose "Authorization" header is "Bearer <repo>" (the route's {repo}); counts
// its calls in *calls.
RouteGate RepoGate(int* calls) {
  return [calls](const Request& req, const PathParams& params) -> std::optional<Response> {
    ++*calls;
    auto repo = params.find("repo");
    if (repo == params.end() || req.Header("Authorization") != "Bearer " + repo->second) {
      return JsonError(401, "not for you");
    }
    return std::nullopt;
  };
}

TEST(RouterGate, AdmitRunsTheGateOfTheRouteThatWouldAnswer) {
  Router router;
  int calls = 0;
  int handled = 0;
  router.Add(
      "POST", "/r/{repo}/ingest",
      [&handled](const Request& req, const PathParams&) {
        ++handled;
        Response r;
        r.body = req.body;
        return r;
      },
      RepoGate(&calls));
  router.Add("GET", "/open", Named("open"));
  Request req = Req("POST", "/r/web/ingest");
  // Without the credential: refused from the header, before any body (and by Dispatch too,
  // for a caller that did not ask Admit first); the handler never runs.
  auto refused = router.Admit(req);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(calls, 1);
  req.body = "payload";
  auto dispatched = router.Dispatch(req);
  ASSERT_TRUE(dispatched.has_value());
  EXPECT_EQ(dispatched->status, 401);
  EXPECT_EQ(handled, 0);
  // The gate sees the path parameters: another repository's credential is refused.
  req.headers = {{"Authorization", "Bearer db"}};
  EXPECT_TRUE(router.Admit(req).has_value());
  req.headers = {{"Authorization", "Bearer web"}};
  EXPECT_FALSE(router.Admit(req).has_value());
  dispatched = router.Dispatch(req);
  ASSERT_TRUE(dispatched.has_value());
  EXPECT_EQ(dispatched->status, 200);
  EXPECT_EQ(dispatched->body, "payload");
  EXPECT_EQ(handled, 1);
  // No gate: admitted. No route, or a method no route serves: answered from the header (404, and
  // the 405 Dispatch gives), so the body of a request nobody serves is never read either.
  calls = 0;
  EXPECT_FALSE(router.Admit(Req("GET", "/open")).has_value());
  auto nowhere = router.Admit(Req("POST", "/nowhere"));
  ASSERT_TRUE(nowhere.has_value());
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_NE(nowhere->body.find("no such endpoint: POST /nowhere"), std::string::npos);
  auto wrong_method = router.Admit(Req("GET", "/r/web/ingest"));
  ASSERT_TRUE(wrong_method.has_value());
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(router.Dispatch(Req("GET", "/r/web/ingest"))->status, 405);
}

}  // namespace
}  // namespace sediment::http
