// Web routes: the UI (webui::Assets, embedded at build time) at /, /search, /cluster and
// /repositories, its files under /assets/, and the plain-text index of the API routes, which
// non-browser clients get at / and everyone at /api/v1. Elastic clients get Elastic's info
// document at / (elastic_routes.cc). No route here needs a token: the UI asks for one and sends it
// with each API call.
#include <string>
#include <string_view>

#include "api/elastic.h"
#include "api/node.h"
#include "api/routes.h"
#include "webui/assets.h"

namespace sediment::api {
namespace {

// The paths of the single-page app's pages: each answers index.html.
constexpr std::string_view kPagePaths[] = {"/search", "/cluster", "/repositories"};

http::Response AssetResponse(const http::Request& req, const webui::Asset& a) {
  http::Response r;
  r.headers.emplace_back("ETag", std::string(a.etag));
  // Hashed names never change content; index.html must be revalidated to pick up a new build.
  r.headers.emplace_back("Cache-Control",
                         a.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (req.Header("If-None-Match") == a.etag) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.content_type = std::string(a.content_type);
  r.body = std::string(a.body);
  return r;
}

// Whether the client asked for a web page (a browser's navigation sends Accept: text/html).
bool WantsHtml(const http::Request& req) {
  return req.Header("Accept").find("text/html") != std::string_view::npos;
}

http::Response RouteIndex(const http::Router& router) {
  http::Response r;
  r.content_type = "text/plain";
  r.body = std::string("sediment ") + kVersion + "\nWeb UI: GET / (a browser)\nAPI:\n";
  for (const std::string& route : router.Describe()) {
    if (route.find(" /internal/") == std::string::npos && route != "GET /" &&
        route.find(" /assets/") == std::string::npos) {
      r.body += "  " + route + "\n";
    }
  }
  return r;
}

}  // namespace

void AddWebRoutes(http::Router& router, const Node& node) {
  router.Add("GET", "/", [&router, node](const http::Request& req, const http::PathParams&) {
    if (auto elastic = ElasticRootAnswer(req, node)) return *elastic;
    if (WantsHtml(req)) return AssetResponse(req, webui::IndexHtml());
    return RouteIndex(router);
  });
  router.Add("GET", "/api/v1", [&router](const http::Request&, const http::PathParams&) {
    return RouteIndex(router);
  });
  for (std::string_view path : kPagePaths) {
    router.Add("GET", path, [](const http::Request& req, const http::PathParams&) {
      return AssetResponse(req, webui::IndexHtml());
    });
  }
  router.Add("GET", "/assets/{name}", [](const http::Request& req, const http::PathParams& p) {
    const webui::Asset* a = webui::FindAsset(p.find("name")->second);
    if (a == nullptr || a->name == "index.html") {
      return http::JsonError(404, "no such UI file: " + req.path);
    }
    return AssetResponse(req, *a);
  });
}

}  // namespace sediment::api
