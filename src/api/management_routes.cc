// Management routes: repositories, ingest tokens and API tokens at run time, kept in Global
// (DeleteRepo, CreateIngestToken, RevokeIngestToken, CreateApiToken, RevokeApiToken; CreateRepo)
// so that every node serves the same set. Secrets are generated here (NewSecret), shown once in
// the 201 answer and stored only as salted hashes. Permissions: api/permissions.h.
//   GET    /api/v1/whoami                                      any API token
//   GET    /api/v1/repositories                                any API token (repositories it
//                                                              can read)
//   POST   /api/v1/repositories              {"name"}          admin
//   DELETE /api/v1/repositories/{repo}                         admin
//   GET    /api/v1/repositories/{repo}/ingest-tokens           manage
//   POST   /api/v1/repositories/{repo}/ingest-tokens {"name", "parser"}   manage
//   DELETE /api/v1/repositories/{repo}/ingest-tokens/{name}    manage
//   GET    /api/v1/tokens                                      admin
//   POST   /api/v1/tokens  {"name", "admin", "repositories": {"R": ["read", ...]}}  admin
//   DELETE /api/v1/tokens/{name}                               admin
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <string>

#include "api/node.h"
#include "api/permissions.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/responses.h"
#include "http/status_code.h"
#include "parsers/parsers.h"

namespace sediment::api {
namespace {

// Generated secrets: 16 random bytes as 32 hex digits.
constexpr size_t kSecretBytes = 16;

constexpr const char* kNameRule =
    "1 to 100 ASCII letters, digits, '-', '_' and '.', not starting with '.'";

void WriteCreatedAt(JsonWriter& w, int64_t ms) {
  w.Key("createdAt");
  if (ms == 0) {
    w.Null();
  } else {
    w.Int(ms);
  }
}

void WritePermissions(JsonWriter& w, const std::map<std::string, uint32_t>& repos) {
  w.BeginObject();
  for (const auto& [repo, bits] : repos) {
    w.Key(repo).BeginArray();
    for (const std::string& p : PermissionNames(bits)) w.String(p);
    w.EndArray();
  }
  w.EndObject();
}

// A JSON object body; nullopt (and *error) when it is not one.
std::optional<simdjson::dom::element> ObjectBody(simdjson::dom::parser& parser,
                                                 const std::string& body, std::string* error) {
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS || !doc.is_object()) {
    *error = "the body must be a JSON object";
    return std::nullopt;
  }
  return doc;
}

class ManagementRoutes : public Node {
 public:
  explicit ManagementRoutes(const Node& node) : Node(node) {}

  http::Response WhoAmI(const http::Request& req) const {
    std::optional<ApiPrincipal> who = ApiCaller(req);
    if (!who) return http::JsonError(401, "unknown API token");
    std::map<std::string, uint32_t> repos = who->repos;
    if (who->admin) {
      global->Read([&](const GlobalState& st) {
        for (const auto& [name, info] : st.repos) repos[name] = kPermAll;
      });
    }
    JsonWriter w;
    w.BeginObject().Key("name").String(who->name).Key("admin").Bool(who->admin);
    w.Key("repositories");
    WritePermissions(w, repos);
    w.EndObject();
    return http::JsonBody(w.Take());
  }

  http::Response ListRepositories(const http::Request& req) const {
    std::optional<ApiPrincipal> who = ApiCaller(req);
    if (!who) return http::JsonError(401, "unknown API token");
    JsonWriter w;
    w.BeginObject().Key("repositories").BeginArray();
    global->Read([&](const GlobalState& st) {
      struct Totals {
        uint64_t events = 0, bytes = 0, raw = 0, segments = 0;
      };
      std::map<std::string, Totals> totals;
      for (const auto& [id, seg] : st.segments) {
        if (seg.staged()) continue;
        Totals& t = totals[seg.datasource.repo];
        t.events += seg.event_count;
        t.bytes += seg.file_size;
        t.raw += seg.raw_bytes;
        t.segments += 1;
      }
      for (const auto& [name, repo] : st.repos) {
        const uint32_t bits = who->On(name);
        if ((bits & kPermRead) == 0) continue;
        const Totals& t = totals[name];
        w.BeginObject().Key("name").String(name);
        w.Key("events").Int(static_cast<int64_t>(t.events));
        w.Key("bytes").Int(static_cast<int64_t>(t.bytes));
        w.Key("rawBytes").Int(static_cast<int64_t>(t.raw));
        w.Key("segments").Int(static_cast<int64_t>(t.segments));
        w.Key("retention").BeginObject().Key("repository").String(name);
        w.Key("retentionMs").Int(repo.retention_ms);
        w.Key("retentionBytes").Int(static_cast<int64_t>(repo.retention_bytes));
        w.EndObject();
        WriteCreatedAt(w, repo.created_ms);
        w.Key("permissions").BeginArray();
        for (const std::string& p : PermissionNames(bits)) w.String(p);
        w.EndArray();
        if ((bits & kPermManage) != 0) {
          w.Key("ingestTokens").BeginArray();
          for (const auto& [token_name, token] : repo.ingest_tokens) {
            w.BeginObject().Key("name").String(token_name).Key("parser");
            if (token.parser.empty()) {
              w.Null();
            } else {
              w.String(token.parser);
            }
            w.EndObject();
          }
          w.EndArray();
        }
        w.EndObject();
      }
    });
    w.EndArray().EndObject();
    return http::JsonBody(w.Take());
  }

  http::Response CreateRepository(const http::Request& req) const {
    simdjson::dom::parser parser;
    std::string error;
    auto doc = ObjectBody(parser, req.body, &error);
    std::string_view name;
    if (!doc || (*doc)["name"].get(name) != simdjson::SUCCESS) {
      return http::JsonError(400, "the body must be {\"name\": \"REPOSITORY\"}");
    }
    if (!IsValidResourceName(name)) {
      return http::JsonError(
          400, "invalid repository name '" + std::string(name) + "': a name is " + kNameRule);
    }
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.repos.count(std::string(name)) > 0; });
    if (exists) {
      return http::JsonError(409, "repository '" + std::string(name) + "' already exists");
    }
    auto r = global->Submit(CreateRepo{std::string(name), clock->NowMillis()});
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kRejected) {
        return http::JsonError(409, "repository '" + std::string(name) + "' already exists");
      }
      return http::JsonErrorFor(r.status());
    }
    spdlog::info("created repository '{}'", name);
    JsonWriter w;
    w.BeginObject().Key("name").String(name).EndObject();
    return http::JsonBody(w.Take(), 201);
  }

  http::Response DeleteRepository(const std::string& name) const {
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.repos.count(name) > 0; });
    if (!exists) return http::JsonError(404, "no repository named '" + name + "'");
    auto r = global->Submit(DeleteRepo{name});
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kRejected) {
        return http::JsonError(404, "no repository named '" + name + "'");
      }
      return http::JsonErrorFor(r.status());
    }
    spdlog::info("deleted repository '{}'", name);
    return http::NoContent();
  }

  http::Response ListIngestTokens(const std::string& repo) const {
    JsonWriter w;
    w.BeginObject().Key("tokens").BeginArray();
    size_t startup = 0;
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      for (const auto& [name, token] : it->second.ingest_tokens) {
        w.BeginObject().Key("name").String(name).Key("parser");
        if (token.parser.empty()) {
          w.Null();
        } else {
          w.String(token.parser);
        }
        WriteCreatedAt(w, token.created_ms);
        w.EndObject();
      }
      startup = it->second.ingest_token_hashes.size() - it->second.ingest_tokens.size();
    });
    w.EndArray();
    // Tokens given by --ingest-token: unnamed, not listed, not revocable here.
    w.Key("startupTokens").Int(static_cast<int64_t>(startup));
    w.EndObject();
    return http::JsonBody(w.Take());
  }

  http::Response CreateIngestTokenRoute(const http::Request& req, const std::string& repo) const {
    simdjson::dom::parser parser;
    std::string error;
    auto doc = ObjectBody(parser, req.body, &error);
    std::string_view name;
    if (!doc || (*doc)["name"].get(name) != simdjson::SUCCESS) {
      return http::JsonError(400, "the body must be {\"name\": \"NAME\", \"parser\": null|\"P\"}");
    }
    if (!IsValidResourceName(name)) {
      return http::JsonError(
          400, "invalid token name '" + std::string(name) + "': a name is " + kNameRule);
    }
    std::string parser_name;
    simdjson::dom::element p;
    if ((*doc)["parser"].get(p) == simdjson::SUCCESS && !p.is_null()) {
      std::string_view v;
      if (p.get(v) != simdjson::SUCCESS) {
        return http::JsonError(400, "'parser' must be a parser name or null");
      }
      parser_name = std::string(v);
    }
    bool exists = false, known_parser = parser_name.empty() || parsers::IsBuiltinName(parser_name);
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      exists = it->second.ingest_tokens.count(std::string(name)) > 0;
      known_parser = known_parser || it->second.parsers.count(parser_name) > 0;
    });
    if (!known_parser) {
      return http::JsonError(
          400, "no parser named '" + parser_name + "' (built-in or of '" + repo + "')");
    }
    if (exists) {
      return http::JsonError(409, "repository '" + repo + "' already has an ingest token named '" +
                                      std::string(name) + "'");
    }
    const std::string secret = NewSecret(kSecretBytes);
    auto r = global->Submit(CreateIngestToken{repo, std::string(name), HashToken(secret),
                                              parser_name, clock->NowMillis()});
    if (!r.ok()) {
      return r.status().code() == StatusCode::kRejected ? http::JsonError(409, r.status().message())
                                                        : http::JsonErrorFor(r.status());
    }
    spdlog::info("created ingest token '{}' of repository '{}'", name, repo);
    JsonWriter w;
    w.BeginObject().Key("name").String(name).Key("token").String(secret).Key("parser");
    if (parser_name.empty()) {
      w.Null();
    } else {
      w.String(parser_name);
    }
    w.Key("repository").String(repo).EndObject();
    return http::JsonBody(w.Take(), 201);
  }

  http::Response RevokeIngestTokenRoute(const std::string& repo, const std::string& name) const {
    bool exists = false;
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      exists = it != st.repos.end() && it->second.ingest_tokens.count(name) > 0;
    });
    if (!exists) {
      return http::JsonError(404,
                             "repository '" + repo + "' has no ingest token named '" + name + "'");
    }
    auto r = global->Submit(RevokeIngestToken{repo, name});
    if (!r.ok()) {
      return r.status().code() == StatusCode::kRejected ? http::JsonError(404, r.status().message())
                                                        : http::JsonErrorFor(r.status());
    }
    spdlog::info("revoked ingest token '{}' of repository '{}'", name, repo);
    return http::NoContent();
  }

  http::Response ListApiTokens() const {
    JsonWriter w;
    w.BeginObject().Key("tokens").BeginArray();
    size_t startup = 0;
    global->Read([&](const GlobalState& st) {
      for (const auto& [name, token] : st.api_tokens) {
        w.BeginObject().Key("name").String(name).Key("admin").Bool(token.admin);
        w.Key("repositories");
        WritePermissions(w, token.repos);
        WriteCreatedAt(w, token.created_ms);
        w.EndObject();
      }
      startup = st.api_token_hashes.size();
    });
    w.EndArray();
    w.Key("startupTokens").Int(static_cast<int64_t>(startup));  // --api-token: admin, unnamed
    w.EndObject();
    return http::JsonBody(w.Take());
  }

  http::Response CreateApiTokenRoute(const http::Request& req) const {
    simdjson::dom::parser parser;
    std::string error;
    auto doc = ObjectBody(parser, req.body, &error);
    std::string_view name;
    if (!doc || (*doc)["name"].get(name) != simdjson::SUCCESS) {
      return http::JsonError(400,
                             "the body must be {\"name\": \"NAME\", \"admin\": false, "
                             "\"repositories\": {\"REPO\": [\"read\", \"ingest\", \"manage\"]}}");
    }
    if (!IsValidResourceName(name)) {
      return http::JsonError(
          400, "invalid token name '" + std::string(name) + "': a name is " + kNameRule);
    }
    CreateApiToken ev;
    ev.name = std::string(name);
    simdjson::dom::element admin;
    if ((*doc)["admin"].get(admin) == simdjson::SUCCESS && !admin.is_null() &&
        admin.get(ev.admin) != simdjson::SUCCESS) {
      return http::JsonError(400, "'admin' must be true or false");
    }
    simdjson::dom::element repos;
    if ((*doc)["repositories"].get(repos) == simdjson::SUCCESS && !repos.is_null()) {
      simdjson::dom::object obj;
      if (repos.get(obj) != simdjson::SUCCESS) {
        return http::JsonError(400, "'repositories' must be an object {\"REPO\": [\"read\"]}");
      }
      for (auto [repo, perms] : obj) {
        simdjson::dom::array arr;
        if (perms.get(arr) != simdjson::SUCCESS) {
          return http::JsonError(400, "the permissions of repository '" + std::string(repo) +
                                          "' must be an array of \"read\", \"ingest\", \"manage\"");
        }
        uint32_t bits = 0;
        for (simdjson::dom::element e : arr) {
          std::string_view p;
          std::optional<uint32_t> bit;
          if (e.get(p) == simdjson::SUCCESS) bit = PermissionBit(p);
          if (!bit) {
            return http::JsonError(400, "unknown permission on repository '" + std::string(repo) +
                                            "': use \"read\", \"ingest\" or \"manage\"");
          }
          bits |= *bit;
        }
        if (bits != 0) ev.repos[std::string(repo)] = bits;
      }
    }
    std::string missing;
    bool exists = false;
    global->Read([&](const GlobalState& st) {
      exists = st.api_tokens.count(ev.name) > 0;
      for (const auto& [repo, bits] : ev.repos) {
        if (missing.empty() && st.repos.count(repo) == 0) missing = repo;
      }
    });
    if (!missing.empty()) return http::JsonError(400, "no repository named '" + missing + "'");
    if (exists) return http::JsonError(409, "an API token named '" + ev.name + "' exists");
    const std::string secret = NewSecret(kSecretBytes);
    ev.token_hash = HashToken(secret);
    ev.created_ms = clock->NowMillis();
    auto r = global->Submit(ev);
    if (!r.ok()) {
      return r.status().code() == StatusCode::kRejected ? http::JsonError(409, r.status().message())
                                                        : http::JsonErrorFor(r.status());
    }
    spdlog::info("created API token '{}' (admin: {}, {} repositories)", ev.name, ev.admin,
                 ev.repos.size());
    JsonWriter w;
    w.BeginObject().Key("name").String(ev.name).Key("token").String(secret);
    w.Key("admin").Bool(ev.admin).Key("repositories");
    WritePermissions(w, ev.repos);
    w.EndObject();
    return http::JsonBody(w.Take(), 201);
  }

  http::Response RevokeApiTokenRoute(const std::string& name) const {
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.api_tokens.count(name) > 0; });
    if (!exists) return http::JsonError(404, "no API token named '" + name + "'");
    auto r = global->Submit(RevokeApiToken{name});
    if (!r.ok()) {
      return r.status().code() == StatusCode::kRejected ? http::JsonError(404, r.status().message())
                                                        : http::JsonErrorFor(r.status());
    }
    spdlog::info("revoked API token '{}'", name);
    return http::NoContent();
  }
};

}  // namespace

void AddManagementRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const ManagementRoutes>(node);
  router.Add(
      "GET", "/api/v1/whoami",
      [self](const http::Request& req, const http::PathParams&) { return self->WhoAmI(req); },
      node.ApiTokenGate());
  // Listing: any API token (it sees what it can read); creating: admin.
  router.Add(
      "GET|POST", "/api/v1/repositories",
      [self](const http::Request& req, const http::PathParams&) {
        return req.method == "POST" ? self->CreateRepository(req) : self->ListRepositories(req);
      },
      [any = node.ApiTokenGate(), admin = node.AdminGate()](const http::Request& req,
                                                            const http::PathParams& p) {
        return req.method == "POST" ? admin(req, p) : any(req, p);
      });
  router.Add(
      "DELETE", "/api/v1/repositories/{repo}",
      [self](const http::Request&, const http::PathParams& p) {
        return self->DeleteRepository(p.find("repo")->second);
      },
      node.AdminGate());
  router.Add(
      "GET|POST", "/api/v1/repositories/{repo}/ingest-tokens",
      [self](const http::Request& req, const http::PathParams& p) {
        const std::string& repo = p.find("repo")->second;
        return req.method == "POST" ? self->CreateIngestTokenRoute(req, repo)
                                    : self->ListIngestTokens(repo);
      },
      node.RepoGate(Permission::kManage));
  router.Add(
      "DELETE", "/api/v1/repositories/{repo}/ingest-tokens/{name}",
      [self](const http::Request&, const http::PathParams& p) {
        return self->RevokeIngestTokenRoute(p.find("repo")->second, p.find("name")->second);
      },
      node.RepoGate(Permission::kManage));
  router.Add(
      "GET|POST", "/api/v1/tokens",
      [self](const http::Request& req, const http::PathParams&) {
        return req.method == "POST" ? self->CreateApiTokenRoute(req) : self->ListApiTokens();
      },
      node.AdminGate());
  router.Add(
      "DELETE", "/api/v1/tokens/{name}",
      [self](const http::Request&, const http::PathParams& p) {
        return self->RevokeApiTokenRoute(p.find("name")->second);
      },
      node.AdminGate());
}

}  // namespace sediment::api
