// Storage routes: the segment list with replica counts (GET /api/v1/cluster/segments),
// per-repository retention (GET/PUT .../retention) and the internal segment file fetch peers copy
// segments with.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/status_code.h"
#include "segment/file_name.h"

namespace sediment::api {
namespace {

int64_t GetInt(simdjson::dom::element doc, const char* key, int64_t dflt, bool* bad) {
  simdjson::dom::element v;
  if (doc[key].get(v)) return dflt;
  int64_t i = 0;
  uint64_t u = 0;
  if (!v.get(i)) return i;
  if (!v.get(u) && u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
  *bad = true;
  return dflt;
}

class StorageRoutes : public Node {
 public:
  explicit StorageRoutes(const Node& node) : Node(node) {}
  http::Response HandleSegmentFile(const http::Request& req) const;
  http::Response HandleClusterSegments(const http::Request& req) const;
  http::Response HandleRetention(const http::Request& req, const std::string& repo) const;
};

http::Response StorageRoutes::HandleSegmentFile(const http::Request& req) const {
  auto it = req.query.find("name");
  if (it == req.query.end() || !IsValidSegmentFileName(it->second)) {
    return http::JsonError(400, "name must be a segment file name (<name>.seg)");
  }
  if (!store->Has(it->second)) return http::JsonError(404, "no segment file " + it->second);
  auto data = store->Read(it->second);
  if (!data.ok()) return http::JsonErrorFor(data.status());
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  return r;
}

http::Response StorageRoutes::HandleClusterSegments(const http::Request& req) const {
  JsonWriter w;
  w.BeginObject();
  global->Read([&](const GlobalState& st) {
    w.Key("factor").Int(EffectiveReplicationFactor(st));
    w.Key("segments").BeginArray();
    for (const auto& [id, seg] : st.segments) {
      w.BeginObject();
      w.Key("id").Int(id.value).Key("repo").String(seg.datasource.repo);
      w.Key("datasource").String(seg.datasource.Key());
      w.Key("partition").Int(seg.partition.value);
      w.Key("minOffset")
          .Int(seg.min_pos.offset.value)
          .Key("maxOffset")
          .Int(seg.max_pos.offset.value);
      w.Key("minTs").Int(seg.min_ts).Key("maxTs").Int(seg.max_ts);
      w.Key("events").Int(static_cast<int64_t>(seg.event_count));
      w.Key("fileSize").Int(static_cast<int64_t>(seg.file_size));
      w.Key("writer").Int(seg.node.value).Key("file").String(seg.file_name);
      int64_t live = 0;
      w.Key("replicas").BeginArray();
      for (NodeId n : seg.replicas) {
        w.Int(n.value);
        if (peers && peers->IsAlive(n)) ++live;
      }
      w.EndArray();
      w.Key("liveReplicas").Int(live);
      w.Key("staged").Bool(seg.staged());
      w.Key("uploaded").Bool(seg.uploaded).Key("generation").Int(seg.generation);
      if (seg.staged()) {
        w.Key("mergeInputs").BeginArray();
        for (SegmentId in : seg.merge_inputs) w.Int(in.value);
        w.EndArray();
      }
      w.EndObject();
    }
    w.EndArray();
  });
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

http::Response StorageRoutes::HandleRetention(const http::Request& req,
                                              const std::string& repo) const {
  std::optional<RepoInfo> info;
  global->Read([&](const GlobalState& st) {
    auto it = st.repos.find(repo);
    if (it != st.repos.end()) info = it->second;
  });
  if (!info) return http::JsonError(404, "no repository named '" + repo + "'");
  if (req.method == "PUT") {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(req.body).get(doc) || !doc.is_object()) {
      return http::JsonError(400,
                             "body must be a JSON object {\"retentionMs\": N, "
                             "\"retentionBytes\": N} (0 = no limit)");
    }
    bool bad = false;
    const int64_t ms = GetInt(doc, "retentionMs", info->retention_ms, &bad);
    const int64_t bytes =
        GetInt(doc, "retentionBytes", static_cast<int64_t>(info->retention_bytes), &bad);
    if (bad || ms < 0 || bytes < 0) {
      return http::JsonError(400, "retentionMs and retentionBytes must be non-negative integers");
    }
    auto r = global->Submit(SetRetention{repo, ms, static_cast<uint64_t>(bytes)});
    if (!r.ok()) return http::JsonErrorFor(r.status());
    info->retention_ms = ms;
    info->retention_bytes = static_cast<uint64_t>(bytes);
    spdlog::info("retention of repository '{}': {} ms, {} bytes (0 = no limit)", repo, ms, bytes);
  }
  JsonWriter w;
  w.BeginObject().Key("repository").String(repo);
  w.Key("retentionMs").Int(info->retention_ms);
  w.Key("retentionBytes").Int(static_cast<int64_t>(info->retention_bytes));
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

}  // namespace

void AddStorageRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const StorageRoutes>(node);
  router.Add(
      "GET", "/api/v1/cluster/segments",
      [self](const http::Request& req, const http::PathParams&) {
        return self->HandleClusterSegments(req);
      },
      node.AdminGate());
  router.Add(
      "GET", "/internal/v1/segment-file",
      [self](const http::Request& req, const http::PathParams&) {
        return self->HandleSegmentFile(req);
      },
      node.InternalGate());
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    router.Add(
        "PUT|GET", std::string(prefix) + "{repo}/retention",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->HandleRetention(req, p.find("repo")->second);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
  }
}

}  // namespace sediment::api
