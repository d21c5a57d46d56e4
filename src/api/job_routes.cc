// The query-job routes and live queries over HTTP (LogScale's query-job API and `isLive`): the
// jobs themselves are coordinator::QueryJobs; this file turns requests into its calls and its
// answers into LogScale's response shapes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "api/node.h"
#include "api/query_common.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "coordinator/lookup_files.h"
#include "coordinator/query_jobs.h"
#include "coordinator/saved_queries.h"
#include "http/status_code.h"
#include "query/lookup.h"

namespace sediment::api {

namespace {

using coordinator::JobView;
using coordinator::QueryControl;
using coordinator::QueryJobs;

constexpr int64_t kPollAfterRunningMs = 250;

std::string RowJson(const query::Row& row) {
  JsonWriter w;
  WriteRowJson(w, row);
  return w.Take();
}

// A poll's answer in LogScale's shape: {done, cancelled, events, metaData}.
std::string PollJson(const JobView& v) {
  JsonWriter w;
  w.BeginObject();
  w.Key("done").Bool(v.done).Key("cancelled").Bool(v.cancelled);
  w.Key("events").BeginArray();
  std::vector<std::string> field_order;
  if (v.result) {
    std::set<std::string> fields;
    for (const auto& row : v.result->rows) {
      WriteRowJson(w, row);
      for (const auto& [name, value] : row) {
        if (field_order.size() < 1000 && fields.insert(name).second) field_order.push_back(name);
      }
    }
  }
  w.EndArray();
  w.Key("metaData").BeginObject();
  w.Key("eventCount").Int(static_cast<int64_t>(v.result ? v.result->rows.size() : 0));
  w.Key("processedBytes").Int(static_cast<int64_t>(v.processed_bytes));
  w.Key("processedEvents").Int(static_cast<int64_t>(v.processed_events));
  w.Key("timeMillis").Int(v.time_ms);
  w.Key("workDone").Int(static_cast<int64_t>(v.work_done));
  w.Key("totalWork").Int(static_cast<int64_t>(v.total_work));
  w.Key("queryStart").Int(v.range.start_ms).Key("queryEnd").Int(v.range.end_ms);
  w.Key("isAggregate").Bool(v.is_aggregate);
  w.Key("pollAfter").Int(v.live ? 1000 : (v.done ? 0 : kPollAfterRunningMs));
  w.Key("resultBufferSize").Int(static_cast<int64_t>(query::ExecOptions{}.max_events));
  w.Key("fieldOrder").BeginArray();
  for (const auto& f : field_order) w.String(f);
  w.EndArray();
  w.Key("extraData").BeginObject().Key("hasMoreEvents").String("false").EndObject();
  w.Key("warnings").BeginArray();
  if (v.result) {
    for (const auto& warning : v.result->warnings) {
      w.BeginObject()
          .Key("category")
          .String("QueryExecution")
          .Key("classification")
          .String("Warning")
          .Key("code")
          .String("sediment.query.warning")
          .Key("message")
          .String(warning)
          .EndObject();
    }
  }
  w.EndArray();
  w.EndObject();  // metaData
  w.EndObject();
  return w.Take();
}

http::Response CreateJob(QueryJobs& jobs, const Global* global,
                         const std::shared_ptr<const query::GeoDatabases>& geo,
                         const std::string& repo, QueryRequestBody body, int64_t now_ms) {
  const coordinator::GlobalLookupFiles files(global, repo, geo);
  auto compiled = query::Compile(body.query_string, &files);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  auto range = query::ParseTimeRange(body.start, body.end, now_ms);
  if (auto interval = query::QueryTimeInterval(**compiled)) {  // setTimeInterval() overrides
    if (body.live) return http::JsonError(400, std::string(kTimeIntervalInLiveQuery));
    range = query::ParseTimeRange(interval->first, interval->second, now_ms);
  }
  if (!range.ok()) return http::JsonError(400, range.status().message());
  if (query::UsesTimeRange(**compiled)) {
    if (body.live) return http::JsonError(400, std::string(kTimeRangeInLiveQuery));
    auto bound = query::BindTimeRange(body.query_string, *range);
    if (!bound.ok()) return http::JsonError(400, bound.status().message());
    body.query_string = std::move(*bound);
    compiled = query::Compile(body.query_string, &files);
    if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  }
  if (body.live && !query::QueryTables(**compiled).empty()) {
    return http::JsonError(400, query::QueryTables(**compiled)[0].function +
                                    "() cannot run in a live query (its subquery runs once, "
                                    "before the query)");
  }
  if (body.live && !body.end.empty() && body.end != "now") {
    return http::JsonError(
        400, "a live query runs up to now: omit 'end' (or give \"now\"), got '" + body.end + "'");
  }
  auto id = jobs.Create(repo, body.query_string, *compiled, *range, body.live);
  if (!id.ok()) return http::JsonErrorFor(id.status());
  JsonWriter w;
  w.BeginObject().Key("id").String(*id);
  w.Key("hashedQueryOnView")
      .String(std::to_string(std::hash<std::string>{}(repo + '\n' + body.query_string)));
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

}  // namespace

http::Response HandleQueryJobs(const Node& n, const http::Request& req, const std::string& repo,
                               const std::string& id) {
  // Access: the route's RepoGate (read).
  if (!n.query_jobs) return http::JsonError(503, "query jobs are not available yet");
  if (id.empty()) {
    if (req.method != "POST") return http::JsonError(405, "use POST for " + req.path);
    QueryRequestBody body;
    const coordinator::GlobalSavedQueries saved(n.global, repo);
    if (auto err = ParseQueryRequest(req.body, &saved, &body)) return *err;
    http::Response r = CreateJob(*n.query_jobs, n.global, n.geo, repo, body, n.clock->NowMillis());
    if (r.status == 200) n.metrics->query_jobs_started.With({body.live ? "live_job" : "job"}).Inc();
    return r;
  }
  if (req.method == "GET") {
    auto view = n.query_jobs->Poll(repo, id);
    if (!view.ok()) return http::JsonErrorFor(view.status());
    if (view->error) {
      http::Response r = QueryErrorResponse(*view->error, view->error_control);
      r.headers.emplace_back("X-Sediment-Query-Job", id);
      return r;
    }
    http::Response r;
    r.body = PollJson(*view);
    return r;
  }
  if (req.method == "DELETE") {
    if (Status st = n.query_jobs->Delete(repo, id); !st.ok()) return http::JsonErrorFor(st);
    http::Response r;
    r.status = 204;
    return r;
  }
  return http::JsonError(405, "use GET or DELETE for " + req.path);
}

http::Response StreamLiveQuery(const Node& n, const http::Request& req, const std::string& repo,
                               const QueryRequestBody& body,
                               std::shared_ptr<const query::CompiledQuery> compiled) {
  if (!body.end.empty() && body.end != "now") {
    return http::JsonError(
        400, "a live query runs up to now: omit 'end' (or give \"now\"), got '" + body.end + "'");
  }
  auto range = query::ParseTimeRange(body.start, "", n.clock->NowMillis());
  if (!range.ok()) return http::JsonError(400, range.status().message());
  if (!n.query_jobs) return http::JsonError(503, "live queries are not available yet");
  auto slot = n.query_jobs->TryAcquire();
  if (!slot.ok()) return http::JsonErrorFor(slot.status());
  n.metrics->query_jobs_started.With({"live_stream"}).Inc();
  struct Live {
    std::shared_ptr<QueryJobs::Slot> slot;
    std::shared_ptr<const query::CompiledQuery> compiled;
    std::string repo, query_string;
    int64_t window_ms = 0;
    bool aggregate = false, ndjson = false;
    coordinator::LiveEventFilter filter{RowJson};
    std::string last_snapshot;  // aggregate: the last result sent
    bool first_item = true;     // JSON array mode: no comma before the first element
  };
  auto live = std::make_shared<Live>();
  live->slot = std::move(*slot);
  live->compiled = std::move(compiled);
  live->repo = repo;
  live->query_string = body.query_string;
  live->window_ms = range->end_ms - range->start_ms;
  live->aggregate = query::IsAggregate(*live->compiled);
  live->ndjson = req.Header("Accept").find("application/x-ndjson") != std::string_view::npos;

  // One run over the window now; the text to send for it (empty: nothing new).
  auto run_once = [&n, live](std::vector<std::string>* warnings) -> Result<std::string> {
    const int64_t now = n.clock->NowMillis();
    query::TimeRange window{now - live->window_ms, now};
    QueryControl control = n.LimitsFromNow();
    control.cancel = live->slot->cancel();
    auto run = n.coordinator->Run(live->repo, live->query_string, *live->compiled, window, control);
    if (!run.ok()) return run.status();
    if (warnings) *warnings = run->warnings;
    std::string out;
    auto item = [&](const std::string& json) {
      if (live->ndjson) {
        out += json;
        out.push_back('\n');
      } else {
        if (!live->first_item) out.push_back(',');
        live->first_item = false;
        out += json;
      }
    };
    if (live->aggregate) {
      std::string snapshot = "[";
      for (size_t i = 0; i < run->result.rows.size(); ++i) {
        if (i > 0) snapshot.push_back(',');
        snapshot += RowJson(run->result.rows[i]);
      }
      snapshot.push_back(']');
      if (snapshot != live->last_snapshot) {
        item(snapshot);
        live->last_snapshot = std::move(snapshot);
      }
    } else {
      for (const query::Row* row : live->filter.Fresh(run->result.rows, window.start_ms, now)) {
        item(RowJson(*row));
      }
    }
    return out;
  };

  std::vector<std::string> warnings;
  const auto t0 = SteadyNow();
  auto first = run_once(&warnings);
  if (!first.ok()) return QueryErrorResponse(first.status(), n.LimitsFromNow());
  const auto first_took = std::chrono::duration_cast<std::chrono::microseconds>(SteadyNow() - t0);
  http::Response r;
  r.content_type = live->ndjson ? "application/x-ndjson" : "application/json";
  for (const auto& warning : warnings) r.headers.emplace_back("X-Sediment-Warning", warning);
  r.headers.emplace_back("X-Sediment-Live", "1");
  r.stream = [live, run_once, first = std::move(*first), first_took](http::BodyWriter& w) mutable {
    if (!live->ndjson && !w.Write("[")) return false;
    if (!w.Write(first)) return false;
    auto took = first_took;
    auto stop = [&] { return live->slot->cancel()->load() || !w.Connected(); };
    while (coordinator::SleepUnless(coordinator::NextLiveRun(took), stop)) {
      const auto t = SteadyNow();
      auto next = run_once(nullptr);
      took = std::chrono::duration_cast<std::chrono::microseconds>(SteadyNow() - t);
      if (!next.ok()) {
        if (live->slot->cancel()->load()) break;  // the server is stopping
        spdlog::warn("live query '{}' on {} ends: {}", live->query_string, live->repo,
                     next.status().ToString());
        return false;  // the client sees an incomplete response
      }
      if (!w.Write(*next)) return false;
    }
    if (!w.Connected()) return false;
    return live->ndjson || w.Write("]");
  };
  return r;
}

}  // namespace sediment::api
