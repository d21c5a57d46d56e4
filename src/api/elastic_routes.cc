// Elasticsearch-compatible routes: the handshake endpoints Elastic clients and shippers call before
// they send (GET and HEAD /, /_license, /_xpack, /_cluster/health, index templates, ILM policies,
// ingest pipelines, data streams), answered so that they proceed. The bulk endpoints themselves
// are ingest routes (ingest_routes.cc); their answers are shaped here.
#include <strings.h>

#include <cctype>
#include <string>
#include <string_view>

#include "api/elastic.h"
#include "api/routes.h"
#include "common/json_writer.h"

namespace sediment::api {
namespace {

bool ContainsNoCase(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (strncasecmp(hay.data() + i, needle.data(), needle.size()) == 0) return true;
  }
  return false;
}

// The N of "compatible-with=N" in the request's Accept (or Content-Type); 0 when absent.
int CompatibleWith(const http::Request& req) {
  for (std::string_view h : {req.Header("Accept"), req.Header("Content-Type")}) {
    static constexpr std::string_view kKey = "compatible-with=";
    size_t at = h.find(kKey);
    if (at == std::string_view::npos) continue;
    int n = 0;
    for (size_t i = at + kKey.size();
         i < h.size() && std::isdigit(static_cast<unsigned char>(h[i])); ++i) {
      n = n * 10 + (h[i] - '0');
      if (n > 1000) return 0;
    }
    return n;
  }
  return 0;
}

// The version GET / reports. Beats refuse an Elasticsearch older than themselves, so a Beat
// ("Elastic-Filebeat/8.12.2 ...", "Filebeat/9.0.0") is told its own version; a client asking for
// compatible-with=N gets a release of major N; everyone else 8.17.0.
std::string ReportedVersion(const http::Request& req) {
  std::string_view ua = req.Header("User-Agent");
  for (size_t at = 0; (at = ua.find("beat/", at)) != std::string_view::npos; ++at) {
    size_t i = at + 5, dots = 0;
    std::string v;
    while (i < ua.size() && (std::isdigit(static_cast<unsigned char>(ua[i])) || ua[i] == '.')) {
      dots += ua[i] == '.';
      v.push_back(ua[i++]);
    }
    if (dots == 2 && std::isdigit(static_cast<unsigned char>(v.front())) &&
        std::isdigit(static_cast<unsigned char>(v.back()))) {
      return v;
    }
  }
  switch (CompatibleWith(req)) {
    case 7:
      return "7.17.0";
    case 9:
      return "9.0.0";
    default:
      return "8.17.0";
  }
}

bool LooksLikeElasticClient(const http::Request& req) {
  std::string_view auth = req.Header("Authorization");
  if (ContainsNoCase(auth.substr(0, 7), "Basic ") || ContainsNoCase(auth.substr(0, 7), "ApiKey "))
    return true;
  if (ContainsNoCase(req.Header("Accept"), "application/vnd.elasticsearch")) return true;
  if (!req.Header("X-Elastic-Client-Meta").empty()) return true;
  std::string_view ua = req.Header("User-Agent");
  for (std::string_view name : {"elastic", "beat", "logstash", "fluent-bit"}) {
    if (ContainsNoCase(ua, name)) return true;
  }
  return false;
}

http::Response ElasticJson(const http::Request& req, std::string body) {
  http::Response r;
  r.body = std::move(body);
  ElasticHeaders(req, &r);
  return r;
}

http::Response Info(const http::Request& req, const Node& node) {
  JsonWriter w;
  w.BeginObject().Key("name").String("sediment-" + std::to_string(node.node.value));
  w.Key("cluster_name").String("sediment").Key("cluster_uuid").String("sediment");
  w.Key("version").BeginObject().Key("number").String(ReportedVersion(req));
  w.Key("build_flavor").String("default").Key("build_type").String("sediment");
  w.Key("build_hash").String(kVersion).Key("build_date").String("2024-01-01T00:00:00.000Z");
  w.Key("build_snapshot").Bool(false).Key("lucene_version").String("9.12.0");
  w.Key("minimum_wire_compatibility_version").String("7.17.0");
  w.Key("minimum_index_compatibility_version").String("7.0.0").EndObject();
  w.Key("tagline").String("You Know, for Search").EndObject();
  return ElasticJson(req, w.Take());
}

constexpr const char* kLicense =
    R"({"status":"active","uid":"00000000-0000-0000-0000-000000000000","type":"basic",)"
    R"("mode":"basic","issue_date":"2024-01-01T00:00:00.000Z","issue_date_in_millis":)"
    R"(1704067200000,"max_nodes":1000,"issued_to":"sediment","issuer":"sediment",)"
    R"("start_date_in_millis":-1})";

// What a GET of an existing template / policy / pipeline / data stream looks like: enough for a
// shipper that checks for it to find it and not to create it.
std::string Existing(std::string_view kind, const std::string& name) {
  JsonWriter w;
  if (kind == "_index_template" || kind == "_component_template") {
    const bool index = kind == "_index_template";
    w.BeginObject().Key(index ? "index_templates" : "component_templates").BeginArray();
    w.BeginObject().Key("name").String(name);
    w.Key(index ? "index_template" : "component_template").BeginObject();
    if (index) w.Key("index_patterns").BeginArray().String(name + "*").EndArray();
    w.Key("template").BeginObject().EndObject().EndObject().EndObject().EndArray().EndObject();
  } else if (kind == "_data_stream") {
    w.BeginObject().Key("data_streams").BeginArray().BeginObject().Key("name").String(name);
    w.Key("status").String("GREEN").Key("template").String(name).EndObject().EndArray();
    w.EndObject();
  } else if (kind == "_template") {
    w.BeginObject().Key(name).BeginObject().Key("index_patterns").BeginArray();
    w.String(name + "*").EndArray().EndObject().EndObject();
  } else if (kind == "_ilm/policy") {
    w.BeginObject().Key(name).BeginObject().Key("version").Int(1);
    w.Key("policy").BeginObject().Key("phases").BeginObject().EndObject().EndObject();
    w.EndObject().EndObject();
  } else {  // _ingest/pipeline
    w.BeginObject().Key(name).BeginObject().Key("processors").BeginArray().EndArray();
    w.EndObject().EndObject();
  }
  return w.Take();
}

}  // namespace

void ElasticHeaders(const http::Request& req, http::Response* r) {
  r->headers.emplace_back("X-Elastic-Product", "Elasticsearch");
  const int n = CompatibleWith(req);
  r->content_type = n > 0
                        ? "application/vnd.elasticsearch+json;compatible-with=" + std::to_string(n)
                        : "application/json";
}

http::Response ElasticBulkAnswer(const http::Request& req,
                                 const std::vector<ingest::BulkItem>& items, int64_t took_ms) {
  bool errors = false;
  for (const ingest::BulkItem& item : items) errors |= item.status >= 300;
  JsonWriter w;
  w.BeginObject().Key("took").Int(took_ms).Key("errors").Bool(errors);
  w.Key("items").BeginArray();
  int64_t seq_no = 0;
  for (const ingest::BulkItem& item : items) {
    w.BeginObject().Key(item.action).BeginObject();
    w.Key("_index").String(item.index).Key("_id").String(item.id);
    if (item.status < 300) {
      w.Key("_version").Int(1).Key("result").String("created");
      w.Key("_shards").BeginObject().Key("total").Int(1).Key("successful").Int(1);
      w.Key("failed").Int(0).EndObject();
      w.Key("_seq_no").Int(seq_no++).Key("_primary_term").Int(1);
      w.Key("status").Int(item.status);
    } else {
      w.Key("status").Int(item.status);
      w.Key("error").BeginObject().Key("type").String(item.error_type);
      w.Key("reason").String(item.error_reason);
      if (!item.cause_type.empty()) {
        w.Key("caused_by").BeginObject().Key("type").String(item.cause_type);
        w.Key("reason").String(item.cause_reason).EndObject();
      }
      w.EndObject();
    }
    w.EndObject().EndObject();
  }
  w.EndArray().EndObject();
  return ElasticJson(req, w.Take());
}

std::optional<http::Response> ElasticRootAnswer(const http::Request& req, const Node& node) {
  if (!LooksLikeElasticClient(req)) return std::nullopt;
  if (!req.Header("Authorization").empty()) {
    if (auto refused = node.ElasticGate()(req, {})) return refused;
  }
  return Info(req, node);
}

void AddElasticRoutes(http::Router& router, const Node& node) {
  // HEAD /: the clients' ping. An answer without a body (Content-Length 0).
  router.Add("HEAD", "/", [node](const http::Request& req, const http::PathParams&) {
    auto r = ElasticRootAnswer(req, node);
    http::Response out = r ? std::move(*r) : Info(req, node);
    out.body.clear();
    return out;
  });
  router.Add(
      "GET", "/_license",
      [](const http::Request& req, const http::PathParams&) {
        return ElasticJson(req, std::string(R"({"license":)") + kLicense + "}");
      },
      node.ElasticGate());
  router.Add(
      "GET", "/_xpack",
      [](const http::Request& req, const http::PathParams&) {
        return ElasticJson(req, std::string(R"({"build":{"hash":"","date":""},"license":)") +
                                    kLicense + R"(,"features":{}})");
      },
      node.ElasticGate());
  router.Add(
      "GET", "/_cluster/health",
      [](const http::Request& req, const http::PathParams&) {
        return ElasticJson(
            req,
            R"({"cluster_name":"sediment","status":"green","timed_out":false,"number_of_nodes":1,)"
            R"("number_of_data_nodes":1,"active_primary_shards":0,"active_shards":0,)"
            R"("relocating_shards":0,"initializing_shards":0,"unassigned_shards":0,)"
            R"("delayed_unassigned_shards":0,"number_of_pending_tasks":0,)"
            R"("number_of_in_flight_fetch":0,"task_max_waiting_in_queue_millis":0,)"
            R"("active_shards_percent_as_number":100.0})");
      },
      node.ElasticGate());
  // Templates, policies, pipelines, data streams: every one "exists" (sediment needs no mappings
  // or lifecycle), and creating one is acknowledged and changes nothing.
  for (const char* kind : {"_index_template", "_component_template", "_template", "_ilm/policy",
                           "_ingest/pipeline", "_data_stream"}) {
    router.Add(
        "GET|HEAD|PUT|POST", std::string("/") + kind + "/{name}",
        [kind = std::string(kind)](const http::Request& req, const http::PathParams& params) {
          if (req.method == "PUT" || req.method == "POST") {
            return ElasticJson(req, R"({"acknowledged":true})");
          }
          http::Response r = ElasticJson(req, Existing(kind, params.at("name")));
          if (req.method == "HEAD") r.body.clear();
          return r;
        },
        node.ElasticGate());
  }
}

}  // namespace sediment::api
