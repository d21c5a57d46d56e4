// Lookup file routes: a repository's CSV and JSON lookup files (for match(), readFile()), kept in
// Global (PutLookupFile / DeleteLookupFile, global/README.md) so that every node has them.
//   POST   /api/v1/repositories/{repo}/files         upload (multipart part `file`, as LogScale,
//                                                    or the raw body with ?name=)
//   GET    /api/v1/repositories/{repo}/files         list: [{"name", "size"}] by name
//   GET    /api/v1/repositories/{repo}/files/{name}  the content as uploaded
//   DELETE /api/v1/repositories/{repo}/files/{name}  204
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "api/lookup_files.h"
#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/status_code.h"

namespace sediment::api {
namespace {

class LookupRoutes : public Node {
 public:
  explicit LookupRoutes(const Node& node) : Node(node) {}
  http::Response Upload(const http::Request& req, const std::string& repo) const;
  http::Response List(const std::string& repo) const;
  http::Response Get(const std::string& repo, const std::string& name) const;
  http::Response Delete(const std::string& repo, const std::string& name) const;
};

http::Response LookupRoutes::Upload(const http::Request& req, const std::string& repo) const {
  auto upload = ParseLookupUpload(req.Header("Content-Type"), req.body, req.query);
  if (!upload.ok()) return http::JsonErrorFor(upload.status());
  if (Status st = CheckLookupFile(upload->name, upload->content); !st.ok()) {
    return http::JsonErrorFor(st);
  }
  const size_t size = upload->content.size();
  auto r = global->Submit(PutLookupFile{repo, upload->name, std::move(upload->content)});
  if (!r.ok()) return http::JsonErrorFor(r.status());
  spdlog::info("lookup file '{}' of repository '{}': {} bytes", upload->name, repo, size);
  JsonWriter w;
  w.BeginObject().Key("repository").String(repo).Key("name").String(upload->name);
  w.Key("size").Int(static_cast<int64_t>(size)).EndObject();
  http::Response resp;
  resp.body = w.Take();
  return resp;
}

http::Response LookupRoutes::List(const std::string& repo) const {
  JsonWriter w;
  w.BeginArray();
  global->Read([&](const GlobalState& st) {
    auto it = st.repos.find(repo);
    if (it == st.repos.end()) return;
    for (const auto& [name, content] : it->second.lookup_files) {
      w.BeginObject().Key("name").String(name);
      w.Key("size").Int(static_cast<int64_t>(content.size())).EndObject();
    }
  });
  w.EndArray();
  http::Response resp;
  resp.body = w.Take();
  return resp;
}

http::Response LookupRoutes::Get(const std::string& repo, const std::string& name) const {
  std::optional<std::string> content;
  global->Read([&](const GlobalState& st) {
    auto it = st.repos.find(repo);
    if (it == st.repos.end()) return;
    auto f = it->second.lookup_files.find(name);
    if (f != it->second.lookup_files.end()) content = f->second;
  });
  if (!content) {
    return http::JsonError(404, "no lookup file '" + name + "' in repository '" + repo + "'");
  }
  http::Response resp;
  resp.content_type = LookupFileKindOf(name) == LookupFileKind::kJson ? "application/json"
                                                                      : "text/csv; charset=utf-8";
  resp.body = std::move(*content);
  return resp;
}

http::Response LookupRoutes::Delete(const std::string& repo, const std::string& name) const {
  bool exists = false;
  global->Read([&](const GlobalState& st) {
    auto it = st.repos.find(repo);
    exists = it != st.repos.end() && it->second.lookup_files.count(name) > 0;
  });
  if (!exists) {
    return http::JsonError(404, "no lookup file '" + name + "' in repository '" + repo + "'");
  }
  auto r = global->Submit(DeleteLookupFile{repo, name});
  // Deleted meanwhile by another request: the file is gone either way.
  if (!r.ok() && r.status().code() != StatusCode::kRejected) return http::JsonErrorFor(r.status());
  spdlog::info("lookup file '{}' of repository '{}' deleted", name, repo);
  http::Response resp;
  resp.status = 204;
  resp.content_type.clear();
  return resp;
}

}  // namespace

void AddLookupRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const LookupRoutes>(node);
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    const std::string base = std::string(prefix) + "{repo}/files";
    router.Add(
        "POST|GET", base,
        [self](const http::Request& req, const http::PathParams& p) {
          const std::string& repo = p.find("repo")->second;
          return req.method == "POST" ? self->Upload(req, repo) : self->List(repo);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    router.Add(
        "GET|DELETE", base + "/{name}",
        [self](const http::Request& req, const http::PathParams& p) {
          const std::string& repo = p.find("repo")->second;
          const std::string& name = p.find("name")->second;
          return req.method == "GET" ? self->Get(repo, name) : self->Delete(repo, name);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
  }
}

}  // namespace sediment::api
