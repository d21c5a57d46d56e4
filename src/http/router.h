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
// A route's authentication, decided from the request's header alone (its `body` may be empty:
// the server asks before it reads the body, ServerOptions::admit): nullopt admits, a response
// (401, 403, 404, ...) refuses. Must not read `body`. Called concurrently.
using RouteGate = std::function<std::optional<Response>(const Request&, const PathParams&)>;

// Not thread-safe while routes are added; Admit and Dispatch may then be called from any thread.
class Router {
 public:
  // `methods`: "GET", "POST|GET", ..., or "*" (every method: the handler answers the ones it does
  // not serve). `pattern`: "/"-separated segments; "{name}" matches one non-empty segment (any
  // characters but "/"), every other segment itself. A route added earlier wins over a later one
  // that matches the same request. `gate` (empty: every caller is admitted) runs before the
  // handler: the handler only sees requests it admitted.
  void Add(std::string_view methods, std::string_view pattern, RouteHandler handler,
           RouteGate gate = nullptr);

  // For a request whose body is not read yet: the refusal of the gate of the route that would
  // answer it (the first that matches the path and the method); nullopt when the gate admits it
  // or the route has no gate. A request no route serves is answered here too, so its body is
  // never read: 405 as Dispatch answers it when routes match the path under other methods only,
  // else NoSuchEndpoint's 404.
  std::optional<Response> Admit(const Request& req) const;

  // The 404 for a request no route matches: {"error": "no such endpoint: METHOD PATH"}.
  static Response NoSuchEndpoint(const Request& req);

  // The answer of the first route that matches the path and the method: its gate's refusal, else
  // its handler's answer. When routes match the path under other methods only: 405 with a JSON
  // error "use M1 or M2 for PATH" and an Allow header. nullopt when no route matches the path.
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
    RouteGate gate;
  };
  // The route answering `req` (matching path and method) with its parameters in *params, or
  // null; *allowed gets the methods of routes matching the path only.
  const Route* Find(const Request& req, PathParams* params,
                    std::vector<std::string>* allowed) const;
  static bool Match(const Route& route, const std::vector<std::string_view>& path,
                    PathParams* params);
  std::vector<Route> routes_;
};

}  // namespace sediment::http
