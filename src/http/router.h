// Maps (method, path) to a handler, with path parameters. A route module registers its routes in
// one place; the server answers what no route matches.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"

namespace sediment::http {

// Values of a matched route's "{name}" segments.
using PathParams = std::map<std::string, std::string, std::less<>>;
using RouteHandler = std::function<Response(const Request&, const PathParams&)>;

// Not thread-safe while routes are added; Dispatch may then be called from any thread.
class Router {
 public:
  // `methods`: "GET", "POST|GET", ..., or "*" (every method: the handler answers the ones it does
  // not serve). `pattern`: "/"-separated segments; "{name}" matches one non-empty segment (any
  // characters but "/"), every other segment itself. A route added earlier wins over a later one
  // that matches the same request.
  void Add(std::string_view methods, std::string_view pattern, RouteHandler handler);

  // The answer of the first route that matches the path and the method. When routes match the
  // path under other methods only: 405 with a JSON error "use M1 or M2 for PATH" and an Allow
  // header. nullopt when no route matches the path.
  std::optional<Response> Dispatch(const Request& req) const;

  // "METHODS PATTERN" of every route, in the order added.
  std::vector<std::string> Describe() const;

 private:
  struct Route {
    std::vector<std::string> methods;  // empty: every method
    std::string methods_text;
    std::string pattern;
    std::vector<std::string> segments;
    RouteHandler handler;
  };
  static bool Match(const Route& route, const std::vector<std::string_view>& path,
                    PathParams* params);
  std::vector<Route> routes_;
};

}  // namespace sediment::http
