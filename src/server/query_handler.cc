// The query routes: the public query endpoint (coordinated by coordinator::Coordinator) and the
// internal routes peers answer for a coordinator (coordinator/INTERNAL_API.md): buffers, partial,
// segments and cancel. LocalQueryNode adapts this node's digest, segment store and replicator to
// the coordinator's LocalNode.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "query/wire.h"
#include "segment/segment.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

// Results with more rows than this are sent as a chunked stream instead of one body.
constexpr size_t kStreamRowsAbove = 2000;

using SteadyClock = std::chrono::steady_clock;
using coordinator::InternalQuery;
using coordinator::JoinIds;

query::SegmentSource SegmentSourceOf(const SegmentRecord& seg, const std::string& segment_dir) {
  query::SegmentSource src;
  src.path = JoinPath(segment_dir, seg.file_name);
  src.id = seg.id;
  src.datasource = seg.datasource;
  src.partition = seg.partition;
  src.min_ts = seg.min_ts;
  src.max_ts = seg.max_ts;
  return src;
}

// The partitions of `want` (partition -> claim epoch) that `digest` digests under exactly that
// epoch.
std::set<int32_t> ServedPartitions(const Digest& digest, const std::map<int32_t, Epoch>& want) {
  std::set<int32_t> served;
  for (const auto& st : digest.PartitionStatuses()) {
    auto it = want.find(st.partition.value);
    if (st.claimed && it != want.end() && it->second == st.epoch) served.insert(it->first);
  }
  return served;
}

// The partitions of `want` that are not in `served`.
std::vector<int64_t> MissingPartitions(const std::map<int32_t, Epoch>& want,
                                       const std::set<int32_t>& served) {
  std::vector<int64_t> missing;
  for (const auto& [p, e] : want) {
    if (served.count(p) == 0) missing.push_back(p);
  }
  return missing;
}

// This node as the coordinator sees it. Thread-safe (every part it borrows is).
class LocalQueryNode final : public coordinator::LocalNode {
 public:
  LocalQueryNode(NodeId node, Digest* digest, SegmentStore* store, Replicator* replicator,
                 bool has_bucket, std::string segment_dir)
      : node_(node),
        digest_(digest),
        store_(store),
        replicator_(replicator),
        has_bucket_(has_bucket),
        segment_dir_(std::move(segment_dir)) {}

  NodeId id() const override { return node_; }
  std::vector<query::BufferedSource> Buffers(const std::map<int32_t, Epoch>& want,
                                             std::vector<int64_t>* not_served) override {
    const std::set<int32_t> served = ServedPartitions(*digest_, want);
    std::vector<PartitionId> only;
    for (int32_t p : served) only.emplace_back(p);
    std::vector<query::BufferedSource> out;
    for (auto& b : digest_->SnapshotBuffers(&only)) {
      auto it = want.find(b.partition.value);
      if (it == want.end() || it->second != b.epoch) continue;
      out.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
    }
    *not_served = MissingPartitions(want, served);
    return out;
  }
  bool HoldsFile(const std::string& file_name) const override { return store_->Has(file_name); }
  query::SegmentSource SourceOf(const SegmentRecord& seg) const override {
    return SegmentSourceOf(seg, segment_dir_);
  }
  std::shared_ptr<void> Pin(const std::vector<std::string>& file_names) override {
    return store_->Pin(file_names);
  }
  bool HasBucket() const override { return has_bucket_; }
  Result<Fetched> FetchFromBucket(const SegmentRecord& seg) override {
    ASSIGN_OR_RETURN(Replicator::FetchOutcome got, replicator_->EnsureLocal(seg));
    return Fetched{got.fetched, got.bytes};
  }
  void ReportUnreadable(SegmentId id) override {
    if (replicator_)
      replicator_->ReportCorrupt(id, Status::Corruption("a query could not read it"));
  }

 private:
  const NodeId node_;
  Digest* const digest_;
  SegmentStore* const store_;
  Replicator* const replicator_;  // null: no replication (then no bucket either)
  const bool has_bucket_;
  const std::string segment_dir_;
};

http::Response MatchSetResponse(const query::MatchSet& set) {
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = query::EncodeMatchSet(set);
  return r;
}

// ExecOptions of a query that runs for a peer: the time it has left and the memory bound.
query::ExecOptions PeerExecOptions(const InternalQuery& q, int threads,
                                   const std::atomic<bool>* cancel) {
  query::ExecOptions exec;
  exec.threads = threads;
  exec.cancel = cancel;
  exec.max_memory_bytes = static_cast<size_t>(q.max_memory_bytes);
  if (q.timeout_ms > 0)
    exec.deadline = SteadyClock::now() + std::chrono::milliseconds(q.timeout_ms);
  return exec;
}

// Registers an internal query's cancel flag under its query id while it runs.
class InternalQueryScope {
 public:
  InternalQueryScope(std::mutex* mu,
                     std::multimap<std::string, std::shared_ptr<std::atomic<bool>>>* registry,
                     const std::string& id)
      : mu_(mu), registry_(registry), flag_(std::make_shared<std::atomic<bool>>(false)) {
    if (id.empty()) return;
    std::lock_guard lock(*mu_);
    it_ = registry_->emplace(id, flag_);
    registered_ = true;
  }
  ~InternalQueryScope() {
    if (!registered_) return;
    std::lock_guard lock(*mu_);
    registry_->erase(it_);
  }
  InternalQueryScope(const InternalQueryScope&) = delete;
  InternalQueryScope& operator=(const InternalQueryScope&) = delete;
  const std::atomic<bool>* flag() const { return flag_.get(); }

 private:
  std::mutex* mu_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>>* registry_;
  std::shared_ptr<std::atomic<bool>> flag_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>>::iterator it_;
  bool registered_ = false;
};

// The internal query in the body of `req` and its compiled form; a 400 response when either is
// bad.
std::optional<http::Response> ParseInternalRequest(
    const http::Request& req, InternalQuery* q,
    std::shared_ptr<const query::CompiledQuery>* compiled) {
  auto decoded = coordinator::DecodeInternalQuery(req.body);
  if (!decoded.ok()) return http::JsonError(400, decoded.status().message());
  auto c = query::Compile(decoded->query_string);
  if (!c.ok()) return http::JsonError(400, c.status().message());
  *q = std::move(*decoded);
  *compiled = std::move(*c);
  return std::nullopt;
}

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

}  // namespace

std::optional<http::Response> ParseQueryRequest(const std::string& body, QueryRequestBody* out) {
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
  } catch (const simdjson::simdjson_error& e) {
    return http::JsonError(400, std::string("query body: ") + e.what());
  }
  return std::nullopt;
}

http::Response QueryErrorResponse(const Status& st, const QueryControl& control) {
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
      return http::JsonError(HttpStatusFor(st), st.message());
  }
}

QueryControl Server::Impl::LimitsFromNow() const {
  QueryControl c;
  c.timeout_ms = config.query_timeout_ms;
  if (config.query_timeout_ms > 0) {
    c.deadline = SteadyClock::now() + std::chrono::milliseconds(config.query_timeout_ms);
  }
  c.max_memory_bytes = static_cast<size_t>(config.query_memory_bytes);
  return c;
}

std::optional<http::Response> Server::Impl::CheckQueryAccess(const http::Request& req,
                                                             const std::string& repo) {
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

Result<CoordinatedResult> Server::Impl::RunQuery(const std::string& repo,
                                                 const std::string& query_string,
                                                 const query::CompiledQuery& compiled,
                                                 const query::TimeRange& range,
                                                 const QueryControl& control) {
  return coordinator->Run(repo, query_string, compiled, range, control);
}

void Server::Impl::StartCoordinator() {
  query_local = std::make_unique<LocalQueryNode>(node, digest.get(), store.get(), replicator.get(),
                                                 bucket != nullptr, segment_dir);
  query_peers = coordinator::NewHttpPeerClient([this] { return ClusterSecret(); });
  coordinator::CoordinatorOptions options;
  options.query_threads = config.query_threads;
  options.heartbeat_timeout_ms = config.heartbeat_timeout_ms;
  options.peer_progress_timeout = std::chrono::milliseconds(config.peer_progress_timeout_ms);
  coordinator = std::make_unique<coordinator::Coordinator>(
      env, clock, global.get(), query_local.get(), query_peers.get(),
      [m = membership.get()](NodeId n) -> std::optional<coordinator::PeerInfo> {
        auto view = m->Find(n);
        if (!view) return std::nullopt;
        return coordinator::PeerInfo{view->alive, view->address};
      },
      options);
}

http::Response Server::Impl::HandleQuery(const http::Request& req, const std::string& repo) {
  if (auto err = CheckQueryAccess(req, repo)) return *err;
  QueryRequestBody body;
  if (auto err = ParseQueryRequest(req.body, &body)) return *err;
  auto compiled = query::Compile(body.query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  if (body.live) return StreamLiveQuery(req, repo, body, *compiled);
  auto range = query::ParseTimeRange(body.start, body.end, clock->NowMillis());
  if (!range.ok()) return http::JsonError(400, range.status().message());

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

http::Response Server::Impl::HandleInternalBuffers(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = ParseInternalRequest(req, &q, &compiled)) return *err;
  InternalQueryScope scope(&internal_queries_mu, &internal_queries, q.query_id);
  std::map<int32_t, Epoch> want;
  for (const auto& [p, e] : q.partitions) want[p.value] = e;
  std::vector<int64_t> missing;
  query::ScanInput input;
  for (auto& b : query_local->Buffers(want, &missing)) {
    if (b.datasource.repo == q.repo) input.buffered.push_back(std::move(b));
  }
  // Read after the snapshot: the coordinator's Global must reach at least this far.
  const Offset applied = global->Applied();
  query::ExecOptions exec = PeerExecOptions(q, config.query_threads, scope.flag());
  auto set = query::CollectMatches(env, *compiled, q.range, input, exec);
  if (!set.ok()) return http::JsonError(HttpStatusFor(set.status()), set.status().message());
  http::Response r = MatchSetResponse(*set);
  r.headers.emplace_back(std::string(coordinator::kGlobalAppliedHeader),
                         std::to_string(applied.value));
  if (!missing.empty()) {
    r.headers.emplace_back(std::string(coordinator::kMissingPartitionsHeader), JoinIds(missing));
  }
  return r;
}

namespace {

// The segments of an internal request that this node can read: in `input` (their files in
// `files`), the others in `not_here`.
void ResolveSegments(Env* env, const InternalQuery& q, const GlobalState& st, NodeId node,
                     const SegmentStore& store, const std::string& segment_dir,
                     query::ScanInput* input, std::vector<std::string>* files,
                     std::vector<int64_t>* not_here) {
  for (size_t i = 0; i < q.segments.size(); ++i) {
    const SegmentId id = q.segments[i];
    auto it = st.segments.find(id);
    if (it != st.segments.end() && it->second.replicas.count(node) != 0) {
      input->segments.push_back(SegmentSourceOf(it->second, segment_dir));
      files->push_back(it->second.file_name);
      continue;
    }
    // Removed from Global after the coordinator read it (a merge swapped it out, retention):
    // the file stays for the deletion delay and is still read.
    const std::string& file = q.segment_files[i];
    if (it == st.segments.end() && ValidSegmentFileName(file) && store.Has(file)) {
      auto reader = SegmentReader::Open(env, store.PathOf(file));
      if (reader.ok()) {
        const SegmentInfo& info = (*reader)->info();
        query::SegmentSource src;
        src.path = store.PathOf(file);
        src.id = id;
        src.datasource = info.datasource;
        src.partition = info.partition;
        src.min_ts = info.min_ts;
        src.max_ts = info.max_ts;
        input->segments.push_back(std::move(src));
        files->push_back(file);
        continue;
      }
    }
    not_here->push_back(id.value);
  }
}

// The segments of an internal request that this node can read, their files pinned in the store
// while this lives.
struct HeldSegments {
  query::ScanInput input;
  std::vector<int64_t> not_here;  // asked for, but not held by this node
  SegmentStore::PinHandle pin;
};

HeldSegments HoldSegments(Env* env, const InternalQuery& q, const Global& global, NodeId node,
                          SegmentStore& store, const std::string& segment_dir) {
  HeldSegments held;
  std::vector<std::string> files;
  global.Read([&](const GlobalState& st) {
    ResolveSegments(env, q, st, node, store, segment_dir, &held.input, &files, &held.not_here);
  });
  held.pin = store.Pin(files);
  return held;
}

// The warning of a node's answer when it does not hold segments `not_here` it was asked for.
std::string NotHeldWarning(const std::vector<int64_t>& not_here, NodeId node) {
  return "segments " + JoinIds(not_here) + " are not held by node " + std::to_string(node.value) +
         " (removed or unknown)";
}

// Names the segments a node was asked for but does not hold (its Global no longer lists its copy:
// withdrawn as corrupt, dropped as an extra copy, merged away) in X-Sediment-Segments-Not-Held of
// `r`, so the coordinator reads another copy instead of answering without them.
void ReportNotHeld(const std::vector<int64_t>& not_here, http::Response* r) {
  if (not_here.empty()) return;
  r->headers.emplace_back(std::string(coordinator::kSegmentsNotHeldHeader),
                          JoinIds(not_here, SIZE_MAX));
}

// Reports segments that a query could not read to `replicator` (when there is one) and names them
// in X-Sediment-Unreadable-Segments of `r`.
void ReportUnreadable(const std::vector<SegmentId>& ids, Replicator* replicator,
                      http::Response* r) {
  if (ids.empty()) return;
  std::vector<int64_t> unreadable;
  for (SegmentId id : ids) {
    unreadable.push_back(id.value);
    if (replicator) replicator->ReportCorrupt(id, Status::Corruption("a query could not read it"));
  }
  r->headers.emplace_back(std::string(coordinator::kUnreadableSegmentsHeader),
                          JoinIds(unreadable, SIZE_MAX));
}

}  // namespace

http::Response Server::Impl::HandleInternalSegments(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = ParseInternalRequest(req, &q, &compiled)) return *err;
  InternalQueryScope scope(&internal_queries_mu, &internal_queries, q.query_id);
  HeldSegments held = HoldSegments(env, q, *global, node, *store, segment_dir);
  query::ExecOptions exec = PeerExecOptions(q, config.query_threads, scope.flag());
  auto set = query::CollectMatches(env, *compiled, q.range, held.input, exec, q.max_events);
  if (!set.ok()) return http::JsonError(HttpStatusFor(set.status()), set.status().message());
  if (!held.not_here.empty()) set->warnings.push_back(NotHeldWarning(held.not_here, node));
  http::Response r = MatchSetResponse(*set);
  ReportUnreadable(set->unreadable_segments, replicator.get(), &r);
  ReportNotHeld(held.not_here, &r);
  return r;
}

http::Response Server::Impl::HandleInternalPartial(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = ParseInternalRequest(req, &q, &compiled)) return *err;
  InternalQueryScope scope(&internal_queries_mu, &internal_queries, q.query_id);
  HeldSegments held = HoldSegments(env, q, *global, node, *store, segment_dir);
  query::ExecOptions exec = PeerExecOptions(q, config.query_threads, scope.flag());
  auto partial = query::ExecutePartial(env, *compiled, q.range, held.input, exec);
  if (!partial.ok()) {
    return http::JsonError(HttpStatusFor(partial.status()), partial.status().message());
  }
  if (!held.not_here.empty()) partial->warnings.push_back(NotHeldWarning(held.not_here, node));
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = query::EncodePartial(*partial);
  ReportUnreadable(partial->unreadable_segments, replicator.get(), &r);
  ReportNotHeld(held.not_here, &r);
  return r;
}

http::Response Server::Impl::HandleInternalCancel(const http::Request& req) {
  auto id = coordinator::DecodeCancel(req.body);
  if (!id.ok()) return http::JsonError(400, id.status().message());
  int cancelled = 0;
  {
    std::lock_guard lock(internal_queries_mu);
    auto [lo, hi] = internal_queries.equal_range(*id);
    for (auto it = lo; it != hi; ++it) {
      it->second->store(true);
      ++cancelled;
    }
  }
  JsonWriter w;
  w.BeginObject().Key("cancelled").Int(cancelled).EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

void Server::Impl::AddQueryRoutes() {
  // "dataspaces" is the older name of the repository paths that humiolib still uses.
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    const std::string repo = std::string(prefix) + "{repo}";
    router.Add("POST", repo + "/query",
               [this](const http::Request& req, const http::PathParams& p) {
                 return HandleQuery(req, p.find("repo")->second);
               });
    // The jobs handler checks access before the method, and names the methods it serves.
    router.Add("*", repo + "/queryjobs",
               [this](const http::Request& req, const http::PathParams& p) {
                 return HandleQueryJobs(req, p.find("repo")->second, "");
               });
    router.Add("*", repo + "/queryjobs/{id}",
               [this](const http::Request& req, const http::PathParams& p) {
                 return HandleQueryJobs(req, p.find("repo")->second, p.find("id")->second);
               });
  }
  using Internal = http::Response (Server::Impl::*)(const http::Request&);
  const std::pair<std::string_view, Internal> kInternal[] = {
      {coordinator::kBuffersPath, &Server::Impl::HandleInternalBuffers},
      {coordinator::kSegmentsPath, &Server::Impl::HandleInternalSegments},
      {coordinator::kPartialPath, &Server::Impl::HandleInternalPartial},
      {coordinator::kCancelPath, &Server::Impl::HandleInternalCancel},
  };
  for (const auto& [path, handler] : kInternal) {
    router.Add("POST", path,
               InternalOnly([this, handler](const http::Request& req, const http::PathParams&) {
                 return (this->*handler)(req);
               }));
  }
}

}  // namespace sediment
