#include "api/node.h"

#include <strings.h>

#include <chrono>

#include "common/base64.h"
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

std::vector<std::string> ElasticTokens(const http::Request& req) {
  std::vector<std::string> out;
  std::string_view h = req.Header("Authorization");
  const size_t space = h.find(' ');
  if (space == std::string_view::npos) return out;
  const std::string_view scheme = h.substr(0, space);
  std::string_view cred = h.substr(space + 1);
  while (!cred.empty() && cred.front() == ' ') cred.remove_prefix(1);
  while (!cred.empty() && cred.back() == ' ') cred.remove_suffix(1);
  if (cred.empty()) return out;
  auto is = [&](std::string_view name) {
    return scheme.size() == name.size() &&
           strncasecmp(scheme.data(), name.data(), name.size()) == 0;
  };
  if (is("Basic")) {
    if (auto userpass = DecodeBase64(cred)) {
      const size_t colon = userpass->find(':');
      if (colon != std::string::npos && colon + 1 < userpass->size()) {
        out.push_back(userpass->substr(colon + 1));
      }
    }
  } else if (is("ApiKey")) {
    out.emplace_back(cred);
    if (auto idkey = DecodeBase64(cred)) {
      const size_t colon = idkey->find(':');
      if (colon != std::string::npos && colon + 1 < idkey->size()) {
        out.push_back(idkey->substr(colon + 1));
      }
    }
  } else if (is("Bearer")) {
    out.emplace_back(cred);
  }
  return out;
}

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

bool Node::IsInternalCaller(const http::Request& req) const {
  const std::string& secret = config.cluster_secret;
  const std::string presented = TokenFrom(req, false);
  // Digests of equal length: the comparison's time depends on neither value nor length.
  return !secret.empty() && !presented.empty() &&
         ConstantTimeEquals(Sha256(presented), Sha256(secret));
}

bool Node::IsApiCaller(const http::Request& req) const {
  return tokens != nullptr && tokens->IsApiToken(TokenFrom(req, false));
}

std::optional<ApiPrincipal> Node::ApiCaller(const http::Request& req) const {
  if (tokens == nullptr) return std::nullopt;
  return tokens->Api(TokenFrom(req, false));
}

std::string Node::IngestRepo(const http::Request& req, bool hec) const {
  if (tokens == nullptr) return "";
  const std::string token = TokenFrom(req, hec);
  if (auto repo = tokens->IngestRepo(token)) return *repo;
  auto named = req.query.find("repo");
  if (named == req.query.end()) return "";
  auto who = tokens->Api(token);
  if (!who || !Allows(*who, Permission::kIngest, named->second)) return "";
  bool exists = false;
  global->Read([&](const GlobalState& st) { exists = st.repos.count(named->second) > 0; });
  return exists ? named->second : "";
}

std::string Node::ElasticIngestRepo(const http::Request& req) const {
  if (tokens == nullptr) return "";
  for (const std::string& token : ElasticTokens(req)) {
    if (auto repo = tokens->IngestRepo(token)) return *repo;
  }
  return "";
}

http::RouteGate Node::InternalGate() const {
  return [self = *this](const http::Request& req,
                        const http::PathParams&) -> std::optional<http::Response> {
    if (self.IsInternalCaller(req)) return std::nullopt;
    return http::JsonError(401, "internal endpoint: the cluster secret is required");
  };
}

http::RouteGate Node::ApiTokenGate() const {
  return [self = *this](const http::Request& req,
                        const http::PathParams&) -> std::optional<http::Response> {
    if (TokenFrom(req, false).empty()) {
      return http::JsonError(401, "missing API token (Authorization: Bearer <token>)");
    }
    if (!self.IsApiCaller(req)) return http::JsonError(401, "unknown API token");
    return std::nullopt;
  };
}

http::RouteGate Node::RepoGate(Permission read, Permission write) const {
  return
      [self = *this, read, write](const http::Request& req,
                                  const http::PathParams& params) -> std::optional<http::Response> {
        if (TokenFrom(req, false).empty()) {
          return http::JsonError(401, "missing API token (Authorization: Bearer <token>)");
        }
        std::optional<ApiPrincipal> who = self.ApiCaller(req);
        if (!who) return http::JsonError(401, "unknown API token");
        auto repo = params.find("repo");
        const std::string name = repo == params.end() ? "" : repo->second;
        const Permission need = req.method == "GET" || req.method == "HEAD" ? read : write;
        if (!Allows(*who, need, name)) return Forbidden(*who, need, name);
        bool exists = false;
        self.global->Read([&](const GlobalState& st) { exists = st.repos.count(name) > 0; });
        if (!exists) return http::JsonError(404, "no repository named '" + name + "'");
        return std::nullopt;
      };
}

http::RouteGate Node::AdminGate() const {
  return [self = *this](const http::Request& req,
                        const http::PathParams&) -> std::optional<http::Response> {
    if (TokenFrom(req, false).empty()) {
      return http::JsonError(401, "missing API token (Authorization: Bearer <token>)");
    }
    std::optional<ApiPrincipal> who = self.ApiCaller(req);
    if (!who) return http::JsonError(401, "unknown API token");
    if (!who->admin) return Forbidden(*who, Permission::kAdmin, "");
    return std::nullopt;
  };
}

http::RouteGate Node::IngestGate(bool hec) const {
  return [self = *this, hec](const http::Request& req,
                             const http::PathParams&) -> std::optional<http::Response> {
    if (TokenFrom(req, hec).empty()) {
      const char* m = "missing ingest token (Authorization: Bearer <token>)";
      return hec ? HecError(401, m, 2) : http::JsonError(401, m);
    }
    if (!self.IngestRepo(req, hec).empty()) return std::nullopt;
    // LogScale answers 401 for an unknown token, Splunk HEC 403 "Invalid token".
    return hec ? HecError(403, "unknown ingest token", 4)
               : http::JsonError(401, "unknown ingest token");
  };
}

http::RouteGate Node::ElasticGate() const {
  return [self = *this](const http::Request& req,
                        const http::PathParams&) -> std::optional<http::Response> {
    if (!self.ElasticIngestRepo(req).empty()) return std::nullopt;
    const bool missing = ElasticTokens(req).empty();
    http::Response r = ElasticError(
        401, "security_exception",
        missing ? "missing authentication credentials for REST request [" + req.path + "]"
                : "unable to authenticate with the provided credentials: the password (Basic) or "
                  "API key must be an ingest token");
    r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"security\" charset=\"UTF-8\"");
    r.headers.emplace_back("WWW-Authenticate", "ApiKey");
    return r;
  };
}

http::Response ElasticError(int status, std::string_view type, std::string_view reason) {
  JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("root_cause").BeginArray().BeginObject();
  w.Key("type").String(type).Key("reason").String(reason).EndObject().EndArray();
  w.Key("type").String(type).Key("reason").String(reason).EndObject();
  w.Key("status").Int(status).EndObject();
  http::Response r;
  r.status = status;
  r.body = w.Take();
  r.headers.emplace_back("X-Elastic-Product", "Elasticsearch");
  return r;
}

http::Response HecError(int status, const std::string& message, int hec_code) {
  JsonWriter w;
  w.BeginObject().Key("text").String(message).Key("code").Int(hec_code);
  w.Key("error").String(message).EndObject();
  http::Response r;
  r.status = status;
  r.body = w.Take();
  return r;
}

std::optional<http::Response> HealthAnswer(const http::Request& req, bool up) {
  http::Response r;
  r.status = up ? 200 : 503;
  if (req.path == "/api/v1/health") {
    r.body = up ? R"({"status":"OK"})" : R"({"status":"DOWN"})";
  } else if (req.path == "/services/collector/health" ||
             req.path == "/services/collector/health/1.0") {
    // Splunk HEC's codes: 17 healthy, 18 unhealthy.
    r.body =
        up ? R"({"text":"HEC is healthy","code":17})" : R"({"text":"HEC is unhealthy","code":18})";
  } else {
    return std::nullopt;
  }
  if (!up) r.headers.emplace_back("Retry-After", "1");
  return r;
}

coordinator::QueryControl Node::LimitsFromNow() const {
  return coordinator::QueryLimitsFromNow(config.query_timeout_ms, config.query_memory_bytes);
}

}  // namespace sediment::api
