// Query routes: the public query endpoint (POST .../query, run by coordinator::Coordinator;
// live queries stream), the query-job API (job_routes.cc) and the internal routes other nodes'
// coordinators call (coordinator::Leaf, coordinator/INTERNAL_API.md).
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>

#include "api/node.h"
#include "api/query_common.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "coordinator/internal_query.h"
#include "coordinator/lookup_files.h"
#include "coordinator/saved_queries.h"
#include "http/status_code.h"
#include "query/lookup.h"
#include "query/query.h"

namespace sediment::api {
namespace {

// Results with more rows than this are sent as a chunked stream instead of one body.
constexpr size_t kStreamRowsAbove = 2000;

using coordinator::CoordinatedResult;
using coordinator::QueryControl;

// Appends rows [from, to) as NDJSON lines, or as JSON array elements (a comma before every row
// but the very first of `rows`).
void WriteRowsJson(const std::vector<query::Row>& rows, size_t from, size_t to, bool ndjson,
                   std::string* out) {
  for (size_t i = from; i < to; ++i) {
    JsonWriter w;
    WriteRowJson(w, rows[i]);
    if (!ndjson && i > 0) out->push_back(',');
    out->append(w.str());
    if (ndjson) out->push_back('\n');
  }
}

class QueryRoutes : public Node {
 public:
  explicit QueryRoutes(const Node& node) : Node(node) {}
  http::Response HandleQuery(const http::Request& req, const std::string& repo) const;
  http::Response HandleQueryJobs(const http::Request& req, const std::string& repo,
                                 const std::string& id) const {
    return api::HandleQueryJobs(*this, req, repo, id);
  }

 private:
  Result<CoordinatedResult> RunQuery(const std::string& repo, const std::string& query_string,
                                     const query::CompiledQuery& compiled,
                                     const query::TimeRange& range,
                                     const QueryControl& control) const;
};

Result<CoordinatedResult> QueryRoutes::RunQuery(const std::string& repo,
                                                const std::string& query_string,
                                                const query::CompiledQuery& compiled,
                                                const query::TimeRange& range,
                                                const QueryControl& control) const {
  return CountedQueryRun(*metrics, "query", [&] {
    return coordinator->Run(repo, query_string, compiled, range, control);
  });
}

http::Response QueryRoutes::HandleQuery(const http::Request& req, const std::string& repo) const {
  QueryRequestBody body;
  const coordinator::GlobalSavedQueries saved(global, repo);
  if (auto err = ParseQueryRequest(req.body, &saved, &body)) return *err;
  const coordinator::GlobalLookupFiles files(global, repo, geo);
  auto compiled = query::Compile(body.query_string, &files);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  if (body.live && !query::QueryTables(**compiled).empty()) {
    return http::JsonError(400, query::QueryTables(**compiled)[0].function +
                                    "() cannot run in a live query (its subquery runs once, "
                                    "before the query)");
  }
  if (body.live && query::UsesTimeRange(**compiled)) {
    return http::JsonError(400, std::string(kTimeRangeInLiveQuery));
  }
  if (body.live && query::QueryTimeInterval(**compiled)) {
    return http::JsonError(400, std::string(kTimeIntervalInLiveQuery));
  }
  if (body.live) return api::StreamLiveQuery(*this, req, repo, body, *compiled);
  auto range = query::ParseTimeRange(body.start, body.end, clock->NowMillis());
  if (auto interval = query::QueryTimeInterval(**compiled)) {  // setTimeInterval() overrides
    range = query::ParseTimeRange(interval->first, interval->second, clock->NowMillis());
  }
  if (!range.ok()) return http::JsonError(400, range.status().message());
  if (query::UsesTimeRange(**compiled)) {
    // start()/end(): the range's numbers go into the text, which is what runs here and on the
    // other nodes.
    auto bound = query::BindTimeRange(body.query_string, *range);
    if (!bound.ok()) return http::JsonError(400, bound.status().message());
    body.query_string = std::move(*bound);
    compiled = query::Compile(body.query_string, &files);
    if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  }
  std::unique_ptr<coordinator::QueryAdmission::Ticket> ticket;  // held until the answer is built
  if (query_admission != nullptr) {
    auto admitted = query_admission->TryAdmit();
    if (!admitted.ok()) {
      http::Response busy = http::JsonErrorFor(admitted.status());
      busy.headers.emplace_back("Retry-After", "1");
      return busy;
    }
    ticket = std::move(*admitted);
  }

  // A client that disconnects cancels its query here and on the peers.
  std::atomic<bool> client_gone{false};
  QueryControl control = LimitsFromNow();
  control.cancel = &client_gone;
  const int64_t t0_us = clock->MonotonicMicros();
  auto run = [&] {
    http::DisconnectWatch watch(req, &client_gone);
    return RunQuery(repo, body.query_string, **compiled, *range, control);
  }();
  if (!run.ok()) {
    if (client_gone.load()) {
      spdlog::info("query '{}' on {}: cancelled after {} ms, the client disconnected",
                   body.query_string, repo, (clock->MonotonicMicros() - t0_us) / 1000);
    }
    return QueryErrorResponse(run.status(), control);
  }
  for (const auto& w : run->warnings)
    spdlog::warn("query '{}' on {}: {}", body.query_string, repo, w);

  http::Response r;
  const bool ndjson = req.Header("Accept").find("application/x-ndjson") != std::string_view::npos;
  r.content_type = ndjson ? "application/x-ndjson" : "application/json";
  for (const auto& warning : run->warnings) {
    r.headers.emplace_back("X-Sediment-Warning", warning);
  }
  r.headers.emplace_back("X-Sediment-Events-Scanned",
                         std::to_string(run->result.stats.events_scanned));
  if (bucket) {
    r.headers.emplace_back("X-Sediment-Bucket-Fetches", std::to_string(run->bucket_fetches));
    r.headers.emplace_back("X-Sediment-Bucket-Fetched-Bytes",
                           std::to_string(run->bucket_fetched_bytes));
  }
  if (run->result.rows.size() <= kStreamRowsAbove) {
    if (!ndjson) r.body.push_back('[');
    WriteRowsJson(run->result.rows, 0, run->result.rows.size(), ndjson, &r.body);
    if (!ndjson) r.body.push_back(']');
    return r;
  }
  // A large result goes out in pieces of about 1000 rows (no second copy of the whole body).
  auto rows = std::make_shared<std::vector<query::Row>>(std::move(run->result.rows));
  r.stream = [rows, ndjson](http::BodyWriter& w) {
    if (!ndjson && !w.Write("[")) return false;
    std::string chunk;
    for (size_t i = 0; i < rows->size(); i += 1000) {
      chunk.clear();
      WriteRowsJson(*rows, i, std::min(rows->size(), i + 1000), ndjson, &chunk);
      if (!w.Write(chunk)) return false;
    }
    return ndjson || w.Write("]");
  };
  return r;
}

}  // namespace

std::optional<http::Response> ParseQueryRequest(const std::string& body,
                                                const query::SavedQueries* saved,
                                                QueryRequestBody* out) {
  try {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    auto error = parser.parse(body).get(doc);
    if (error)
      return http::JsonError(
          400, std::string("query body is not JSON: ") + simdjson::error_message(error));
    if (!doc.is_object()) return http::JsonError(400, "query body must be a JSON object");
    std::string_view qs;
    if (doc["queryString"].get(qs)) {
      return http::JsonError(400, "query body needs a string field 'queryString'");
    }
    out->query_string = std::string(qs);
    // A string or a number as text; false for other values.
    auto scalar_text = [](simdjson::dom::element v, std::string* value) -> bool {
      if (v.is_string()) {
        *value = std::string(v.get_string().value());
      } else if (v.is_int64()) {
        *value = std::to_string(v.get_int64().value());
      } else if (v.is_uint64()) {
        *value = std::to_string(v.get_uint64().value());
      } else if (v.is_double()) {
        *value = simdjson::to_string(v);
      } else {
        return false;
      }
      return true;
    };
    auto bound = [&](const char* name, std::string* value) -> std::optional<std::string> {
      simdjson::dom::element v;
      if (doc[name].get(v)) return std::nullopt;
      if (v.is_string()) {
        *value = std::string(v.get_string().value());
      } else if (v.is_int64()) {
        *value = std::to_string(v.get_int64().value());
      } else if (v.is_uint64()) {
        *value = std::to_string(v.get_uint64().value());
      } else if (v.is_null()) {
        value->clear();
      } else {
        return std::string("'") + name + "' must be a string or epoch milliseconds";
      }
      return std::nullopt;
    };
    if (auto e = bound("start", &out->start)) return http::JsonError(400, *e);
    if (auto e = bound("end", &out->end)) return http::JsonError(400, *e);
    simdjson::dom::element live;
    if (!doc["isLive"].get(live) && !live.is_null()) {
      bool b = false;
      if (live.get(b)) return http::JsonError(400, "'isLive' must be true or false");
      out->live = b;
    }
    // "arguments": the values of the query's parameters (?name); the query string becomes the
    // query with them bound, which is what runs here and on the other nodes.
    std::map<std::string, std::string> arguments;
    simdjson::dom::element args;
    if (!doc["arguments"].get(args) && !args.is_null()) {
      simdjson::dom::object obj;
      if (args.get(obj)) {
        return http::JsonError(400, "'arguments' must be an object of parameter values");
      }
      for (auto [key, value] : obj) {
        std::string text;
        if (!scalar_text(value, &text)) {
          return http::JsonError(
              400, "argument '" + std::string(key) + "' must be a string or a number");
        }
        arguments[std::string(key)] = std::move(text);
      }
    }
    if (saved != nullptr && out->query_string.find('$') != std::string::npos) {
      auto expanded = query::ExpandSavedQueries(out->query_string, *saved, arguments);
      if (!expanded.ok()) return http::JsonError(400, expanded.status().message());
      out->query_string = std::move(*expanded);
    }
    if (out->query_string.find('?') != std::string::npos) {
      auto bound_query = query::BindParameters(out->query_string, arguments);
      if (!bound_query.ok()) return http::JsonError(400, bound_query.status().message());
      out->query_string = std::move(*bound_query);
    }
  } catch (const simdjson::simdjson_error& e) {
    return http::JsonError(400, std::string("query body: ") + e.what());
  }
  return std::nullopt;
}

http::Response QueryErrorResponse(const Status& st, const coordinator::QueryControl& control) {
  switch (st.code()) {
    case StatusCode::kDeadlineExceeded:
      return http::JsonError(408, "query timed out: it did not finish within the limit of " +
                                      std::to_string(control.timeout_ms) +
                                      " ms (--query-timeout-ms): " + st.message());
    case StatusCode::kResourceExhausted:
      return http::JsonError(413, "query needs more memory than the limit of " +
                                      std::to_string(control.max_memory_bytes) +
                                      " bytes per node (--query-memory-bytes): " + st.message());
    case StatusCode::kCancelled:
      return http::JsonError(503, "query cancelled: " + st.message());
    default:
      return http::JsonErrorFor(st);
  }
}

void AddQueryRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const QueryRoutes>(node);
  // "dataspaces" is the older name of the repository paths that humiolib still uses.
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    const std::string repo = std::string(prefix) + "{repo}";
    router.Add(
        "POST", repo + "/query",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->HandleQuery(req, p.find("repo")->second);
        },
        node.RepoGate(Permission::kRead));
    // Access is checked (the gate) before the method; the jobs handler names the methods it
    // serves.
    router.Add(
        "*", repo + "/queryjobs",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->HandleQueryJobs(req, p.find("repo")->second, "");
        },
        node.RepoGate(Permission::kRead));
    router.Add(
        "*", repo + "/queryjobs/{id}",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->HandleQueryJobs(req, p.find("repo")->second, p.find("id")->second);
        },
        node.RepoGate(Permission::kRead));
  }
  using Internal = http::Response (coordinator::Leaf::*)(const http::Request&);
  const std::pair<std::string_view, Internal> kInternal[] = {
      {coordinator::kBuffersPath, &coordinator::Leaf::Buffers},
      {coordinator::kSegmentsPath, &coordinator::Leaf::Segments},
      {coordinator::kPartialPath, &coordinator::Leaf::Partial},
      {coordinator::kCancelPath, &coordinator::Leaf::Cancel},
  };
  for (const auto& [path, handler] : kInternal) {
    router.Add(
        "POST", path,
        [self, handler](const http::Request& req, const http::PathParams&) {
          return (self->leaf->*handler)(req);
        },
        node.InternalGate());
  }
}

}  // namespace sediment::api
