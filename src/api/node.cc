#include "api/node.h"

#include <strings.h>

#include <chrono>

#include "common/json_writer.h"

namespace sediment::api {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk) {
  std::string_view h = req.Header("Authorization");
  auto strip = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (h.size() > prefix.size() && strncasecmp(h.data(), prefix.data(), prefix.size()) == 0) {
      std::string_view t = h.substr(prefix.size());
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      return t;
    }
    return std::nullopt;
  };
  if (auto t = strip("Bearer ")) return std::string(*t);
  if (allow_splunk) {
    if (auto t = strip("Splunk ")) return std::string(*t);
  }
  return "";
}

// LogScale serializes every field as a string except @timestamp.
void WriteRowJson(JsonWriter& w, const query::Row& row) {
  w.BeginObject();
  for (const auto& [name, value] : row) {
    w.Key(name);
    if (const auto* s = std::get_if<std::string>(&value)) {
      w.String(*s);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      if (name == "@timestamp") {
        w.Int(*i);
      } else {
        w.String(std::to_string(*i));
      }
    } else {
      JsonWriter num;
      num.Double(std::get<double>(value));
      w.String(num.str());
    }
  }
  w.EndObject();
}

std::string ClusterSecretOf(const std::string& configured, const Global* global) {
  if (!configured.empty()) return configured;
  std::string secret;
  global->Read([&](const GlobalState& st) { secret = st.cluster_secret; });
  return secret;
}

std::string Node::ClusterSecret() const { return ClusterSecretOf(config.cluster_secret, global); }

bool Node::IsInternalCaller(const http::Request& req) const {
  const std::string secret = ClusterSecret();
  return !secret.empty() && ConstantTimeEquals(TokenFrom(req, false), secret);
}

bool Node::IsApiCaller(const http::Request& req) const {
  const std::string token = TokenFrom(req, false);
  if (token.empty()) return false;
  bool ok = false;
  global->Read([&](const GlobalState& st) { ok = st.api_tokens.count(token) > 0; });
  return ok;
}

http::RouteHandler Node::InternalOnly(http::RouteHandler handler) const {
  return [this, handler = std::move(handler)](const http::Request& req,
                                              const http::PathParams& params) {
    if (!IsInternalCaller(req)) {
      return http::JsonError(401, "internal endpoint: cluster secret required");
    }
    return handler(req, params);
  };
}

std::optional<http::Response> Node::CheckQueryAccess(const http::Request& req,
                                                     const std::string& repo) const {
  std::string token = TokenFrom(req, false);
  if (token.empty())
    return http::JsonError(401, "missing API token (Authorization: Bearer <token>)");
  bool authorized = false;
  bool repo_exists = false;
  global->Read([&](const GlobalState& st) {
    authorized = st.api_tokens.count(token) > 0;
    repo_exists = st.repos.count(repo) > 0;
  });
  if (!authorized) return http::JsonError(401, "unknown API token");
  if (!repo_exists) return http::JsonError(404, "no repository named '" + repo + "'");
  return std::nullopt;
}

coordinator::QueryControl Node::LimitsFromNow() const {
  return coordinator::QueryLimitsFromNow(config.query_timeout_ms, config.query_memory_bytes);
}

}  // namespace sediment::api
