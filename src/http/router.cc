#include "http/router.h"

#include <algorithm>

namespace sediment::http {
namespace {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (true) {
    size_t j = text.find(sep, i);
    out.push_back(text.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) return out;
    i = j + 1;
  }
}

bool IsParam(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

void Router::Add(std::string_view methods, std::string_view pattern, RouteHandler handler,
                 RouteGate gate) {
  Route r;
  if (methods != "*") {
    for (std::string_view m : Split(methods, '|')) r.methods.emplace_back(m);
  }
  r.methods_text = std::string(methods);
  r.pattern = std::string(pattern);
  for (std::string_view s : Split(pattern, '/')) r.segments.emplace_back(s);
  r.handler = std::move(handler);
  r.gate = std::move(gate);
  routes_.push_back(std::move(r));
}

bool Router::Match(const Route& route, const std::vector<std::string_view>& path,
                   PathParams* params) {
  if (route.segments.size() != path.size()) return false;
  params->clear();
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& want = route.segments[i];
    if (IsParam(want)) {
      if (path[i].empty()) return false;
      params->emplace(want.substr(1, want.size() - 2), std::string(path[i]));
    } else if (want != path[i]) {
      return false;
    }
  }
  return true;
}

const Router::Route* Router::Find(const Request& req, PathParams* params,
                                  std::vector<std::string>* allowed) const {
  const std::vector<std::string_view> path = Split(req.path, '/');
  for (const Route& route : routes_) {
    if (!Match(route, path, params)) continue;
    if (route.methods.empty() ||
        std::find(route.methods.begin(), route.methods.end(), req.method) != route.methods.end()) {
      return &route;
    }
    for (const auto& m : route.methods) {
      if (std::find(allowed->begin(), allowed->end(), m) == allowed->end()) allowed->push_back(m);
    }
  }
  return nullptr;
}

std::optional<Response> Router::Admit(const Request& req) const {
  PathParams params;
  std::vector<std::string> allowed;
  const Route* route = Find(req, &params, &allowed);
  if (route == nullptr) {
    if (allowed.empty()) return NoSuchEndpoint(req);
    return Dispatch(req);  // the 405: no handler runs
  }
  if (!route->gate) return std::nullopt;
  return route->gate(req, params);
}

Response Router::NoSuchEndpoint(const Request& req) {
  return JsonError(404, "no such endpoint: " + req.method + " " + req.path);
}

std::optional<Response> Router::Dispatch(const Request& req) const {
  PathParams params;
  std::vector<std::string> allowed;
  if (const Route* route = Find(req, &params, &allowed)) {
    if (route->gate) {
      if (auto refused = route->gate(req, params)) return refused;
    }
    return route->handler(req, params);
  }
  if (allowed.empty()) return std::nullopt;
  std::string use, allow;
  for (size_t i = 0; i < allowed.size(); ++i) {
    use += (i == 0 ? "" : " or ") + allowed[i];
    allow += (i == 0 ? "" : ", ") + allowed[i];
  }
  Response r = JsonError(405, "use " + use + " for " + req.path);
  r.headers.emplace_back("Allow", allow);
  return r;
}

std::vector<std::string> Router::Describe() const {
  std::vector<std::string> out;
  for (const Route& r : routes_) out.push_back(r.methods_text + " " + r.pattern);
  return out;
}

}  // namespace sediment::http
