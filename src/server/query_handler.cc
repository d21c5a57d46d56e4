// Queries across the cluster (DESIGN sections 6 and 10). The node that receives a query is its
// coordinator:
//  1. From Global it takes each partition's owner and claim epoch, and asks every owner for the
//     matching events still in its buffers (itself directly, peers over
//     /internal/v1/query/buffers). An owner answers only for partitions it digests under exactly
//     that epoch, and reports the Global offset it had applied when it took the snapshot.
//  2. It waits until its own Global has applied at least that offset, then reads the segment list
//     and every datasource's flushed_through from one Global state. Buffered events at or below
//     flushed_through are in a registered segment and are dropped: each event is counted once,
//     from a segment or from a buffer, while flushes and takeovers go on (one owner per partition
//     is asked; a segment registered after an owner's snapshot raises flushed_through over the
//     events it holds).
//  3. The holder of each segment computes the query's partial state over the segments it was
//     asked for (/internal/v1/query/partial, query::ExecutePartial) and sends it back; this node
//     computes one over the segments it holds, the ones fetched from the bucket and the buffered
//     events, and merges them all (query::FinishPartials).
// P5: whatever could not be read (holder down, owner down, a peer's error) becomes an
// X-Sediment-Warning naming the segments, partitions and time ranges missing.
// A frozen peer: a request that brings no answer byte for --peer-progress-timeout-ms (peers send
// "102 Processing" while they work), or whose node membership declares dead, is abandoned; that
// node is asked nothing more in this query, its segments are read from other copies in a new
// attempt (as for unreadable copies: nothing of the abandoned attempt is kept), and its partitions'
// buffers are asked of a node that claimed them since, else named in a warning.
// Limits: the deadline and memory bound of QueryControl apply here and go to the peers (the time
// that remains); a peer that reaches one fails the whole query, and a coordinator that gives up
// (limit, cancellation) asks the peers to cancel their part (/internal/v1/query/cancel).
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "query/wire.h"
#include "segment/segment.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

constexpr auto kGlobalWait = std::chrono::seconds(5);
// Peer requests of a query without a time limit.
constexpr auto kUnlimitedPeerTimeout = std::chrono::seconds(600);
// Results with more rows than this are sent as a chunked stream instead of one body.
constexpr size_t kStreamRowsAbove = 2000;

using SteadyClock = std::chrono::steady_clock;

// Body of the internal query requests.
struct InternalQuery {
  std::string repo;
  std::string query_string;
  query::TimeRange range;
  std::vector<std::pair<PartitionId, Epoch>> partitions;  // buffers
  std::vector<SegmentId> segments;                        // segments
  std::vector<std::string> segment_files;                 // their file names (same order)
  size_t max_events = SIZE_MAX;                           // the old segments endpoint only
  std::string query_id;                                   // for /internal/v1/query/cancel
  int64_t timeout_ms = 0;                                 // time left; 0 = no limit
  uint64_t max_memory_bytes = 0;                          // 0 = no bound
};

std::string EncodeInternalQuery(const InternalQuery& q) {
  JsonWriter w;
  w.BeginObject().Key("repo").String(q.repo).Key("queryString").String(q.query_string);
  w.Key("startMs").Int(q.range.start_ms).Key("endMs").Int(q.range.end_ms);
  w.Key("partitions").BeginArray();
  for (const auto& [p, e] : q.partitions) {
    w.BeginObject().Key("partition").Int(p.value).Key("epoch").Int(e.value).EndObject();
  }
  w.EndArray();
  w.Key("segments").BeginArray();
  for (SegmentId id : q.segments) w.Int(id.value);
  w.EndArray();
  w.Key("segmentFiles").BeginArray();
  for (const auto& f : q.segment_files) w.String(f);
  w.EndArray();
  if (q.max_events != SIZE_MAX) w.Key("maxEvents").Int(static_cast<int64_t>(q.max_events));
  if (!q.query_id.empty()) w.Key("queryId").String(q.query_id);
  if (q.timeout_ms > 0) w.Key("timeoutMs").Int(q.timeout_ms);
  if (q.max_memory_bytes > 0) w.Key("maxMemoryBytes").Int(static_cast<int64_t>(q.max_memory_bytes));
  w.EndObject();
  return w.Take();
}

Result<InternalQuery> DecodeInternalQuery(const std::string& body) {
  InternalQuery q;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) || !doc.is_object()) {
    return Status::InvalidArgument("internal query: body is not a JSON object");
  }
  std::string_view s;
  int64_t i = 0;
  if (doc["repo"].get(s)) return Status::InvalidArgument("internal query: no repo");
  q.repo = std::string(s);
  if (doc["queryString"].get(s)) return Status::InvalidArgument("internal query: no queryString");
  q.query_string = std::string(s);
  if (doc["startMs"].get(q.range.start_ms) || doc["endMs"].get(q.range.end_ms)) {
    return Status::InvalidArgument("internal query: no startMs/endMs");
  }
  simdjson::dom::array arr;
  if (!doc["partitions"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      int64_t p = 0, epoch = 0;
      if (e["partition"].get(p) || e["epoch"].get(epoch)) {
        return Status::InvalidArgument("internal query: bad partition entry");
      }
      q.partitions.emplace_back(PartitionId(static_cast<int32_t>(p)), Epoch(epoch));
    }
  }
  if (!doc["segments"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      if (e.get(i)) return Status::InvalidArgument("internal query: bad segment id");
      q.segments.emplace_back(i);
    }
  }
  if (!doc["segmentFiles"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      std::string_view f;
      if (e.get(f)) return Status::InvalidArgument("internal query: bad segment file");
      q.segment_files.emplace_back(f);
    }
  }
  if (q.segment_files.size() != q.segments.size()) q.segment_files.assign(q.segments.size(), "");
  if (!doc["maxEvents"].get(i) && i > 0) q.max_events = static_cast<size_t>(i);
  if (!doc["queryId"].get(s)) q.query_id = std::string(s);
  if (!doc["timeoutMs"].get(i) && i > 0) q.timeout_ms = i;
  if (!doc["maxMemoryBytes"].get(i) && i > 0) q.max_memory_bytes = static_cast<uint64_t>(i);
  return q;
}

std::string HeaderOf(const http::ClientResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), name.size()) == 0) return v;
  }
  return "";
}

std::string JoinInts(const std::vector<int64_t>& v, size_t max_items = 20) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < max_items; ++i) {
    if (i > 0) out += ",";
    out += std::to_string(v[i]);
  }
  if (v.size() > max_items) out += ",... (" + std::to_string(v.size()) + " in all)";
  return out;
}

std::vector<int64_t> SplitInts(const std::string& text) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    try {
      out.push_back(std::stoll(text.substr(i, j - i)));
    } catch (const std::exception&) {
    }
    i = j + 1;
  }
  return out;
}

// "3 segments (ids 4,7,9; 1200 events from T1 to T2)".
std::string DescribeSegments(const std::vector<SegmentRecord>& segs) {
  std::vector<int64_t> ids;
  uint64_t events = 0;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& s : segs) {
    ids.push_back(s.id.value);
    events += s.event_count;
    lo = std::min(lo, s.min_ts);
    hi = std::max(hi, s.max_ts);
  }
  return std::to_string(segs.size()) + " segments (ids " + JoinInts(ids) + "; " +
         std::to_string(events) + " events from " + FormatIso8601Millis(lo) + " to " +
         FormatIso8601Millis(hi) + ")";
}

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

// Milliseconds left before `control`'s deadline (at least 1), or 0 without one.
int64_t RemainingMs(const QueryControl& control) {
  if (!control.deadline) return 0;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*control.deadline - SteadyClock::now());
  return std::max<int64_t>(1, left.count());
}

// Wakes a coordinator waiting for any of its peer requests (shared with their threads).
struct PeerWaiter {
  std::mutex mu;
  std::condition_variable cv;
};

// A request to a peer, answered on a detached thread of its own: a coordinator that stops waiting
// (limit, cancellation, a peer that stalls or is declared dead) never blocks on a slow peer. The
// thread owns copies of everything; abandoning the request (Abandon, or destroying the PeerReply
// before its answer came) makes it close the connection within 20 ms.
class PeerReply {
 public:
  // `progress_timeout`: the longest wait for the next byte of the answer (zero = none); the peer
  // is asked for a "102 Processing" answer every fifth of it while it works.
  static PeerReply Post(std::shared_ptr<PeerWaiter> waiter, int64_t node,
                        const std::string& address, const std::string& path, const InternalQuery& q,
                        const std::string& secret, const QueryControl& control,
                        std::chrono::milliseconds progress_timeout) {
    PeerReply reply;
    reply.node_ = node;
    reply.address_ = address;
    reply.waiter_ = waiter;
    reply.state_ = std::make_shared<State>();
    http::FetchOptions options;
    options.timeout = kUnlimitedPeerTimeout;
    if (control.deadline) {
      // The peer stops at the deadline itself; this only bounds a peer that hangs.
      options.timeout = std::chrono::milliseconds(RemainingMs(control) + 5000);
    }
    options.progress_timeout = progress_timeout;
    if (progress_timeout.count() > 0) {
      options.progress_interval = std::max(progress_timeout / 5, std::chrono::milliseconds(50));
    }
    std::thread([state = reply.state_, waiter, url = "http://" + address + path,
                 body = EncodeInternalQuery(q), secret, options]() mutable {
      options.cancel = &state->abort;
      auto r =
          http::Fetch("POST", url,
                      {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}},
                      body, options);
      std::lock_guard lock(waiter->mu);
      if (!state->value) state->value.emplace(std::move(r));
      waiter->cv.notify_all();
    }).detach();
    return reply;
  }

  PeerReply() = default;
  PeerReply(PeerReply&&) = default;
  PeerReply& operator=(PeerReply&&) = default;
  PeerReply(const PeerReply&) = delete;
  PeerReply& operator=(const PeerReply&) = delete;
  ~PeerReply() {
    if (state_) state_->abort.store(true);
  }

  int64_t node() const { return node_; }
  const std::string& address() const { return address_; }
  // Whether the answer (or why there is none) is in. The waiter's mutex must be held.
  bool ReadyLocked() const { return state_->value.has_value(); }
  // Gives up on the answer: Take returns `why` unless the answer was already in. The waiter's
  // mutex must be held.
  void AbandonLocked(Status why) {
    state_->abort.store(true);
    if (!state_->value) state_->value.emplace(std::move(why));
  }
  // The answer, once WaitForPeers returned OK for this reply; counts it in `control.peers_done`.
  Result<http::ClientResponse> Take(const QueryControl& control) {
    std::lock_guard lock(waiter_->mu);
    if (control.peers_done) ++*control.peers_done;
    return std::move(*state_->value);
  }

 private:
  struct State {
    std::atomic<bool> abort{false};                     // read by the request's thread
    std::optional<Result<http::ClientResponse>> value;  // guarded by the waiter's mutex
  };
  int64_t node_ = 0;
  std::string address_;
  std::shared_ptr<PeerWaiter> waiter_;
  std::shared_ptr<State> state_;
};

// Waits until every reply of `replies` is in. A reply whose node `dead` says membership declared
// dead meanwhile (its heartbeat timed out) is abandoned at once, whatever its progress timeout.
// DeadlineExceeded / Cancelled when `control`'s deadline passed or it was cancelled first.
Status WaitForPeers(PeerWaiter& waiter, const std::vector<PeerReply*>& replies,
                    const QueryControl& control, const std::function<bool(int64_t)>& dead,
                    int64_t heartbeat_timeout_ms) {
  std::unique_lock lock(waiter.mu);
  while (true) {
    bool all = true;
    for (PeerReply* r : replies) {
      if (r->ReadyLocked()) continue;
      if (dead(r->node())) {
        r->AbandonLocked(Status::Unavailable(
            "node " + std::to_string(r->node()) + " was declared dead (no heartbeat for " +
            std::to_string(heartbeat_timeout_ms) + " ms, --heartbeat-timeout-ms)"));
        continue;
      }
      all = false;
    }
    if (all) return Status::OK();
    if (control.cancel && control.cancel->load()) {
      return Status::Cancelled("the query was cancelled");
    }
    if (control.deadline && SteadyClock::now() >= *control.deadline) {
      return Status::DeadlineExceeded("waiting for the other nodes' answers");
    }
    waiter.cv.wait_for(lock, std::chrono::milliseconds(50));
  }
}

// Asks every peer in `addresses` to cancel its part of query `query_id` (fire and forget).
void CancelPeers(const std::string& query_id, const std::set<std::string>& addresses,
                 const std::string& secret) {
  for (const auto& address : addresses) {
    JsonWriter w;
    w.BeginObject().Key("queryId").String(query_id).EndObject();
    std::thread([url = "http://" + address + "/internal/v1/query/cancel", body = w.Take(), secret] {
      (void)http::Fetch(
          "POST", url,
          {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}}, body,
          std::chrono::seconds(5));
    }).detach();
  }
}

// A peer's failure status from its HTTP answer: its limits keep their codes (the whole query
// fails), anything else is Unavailable (the data it was asked for is missing).
Status PeerFailure(const http::ClientResponse& r) {
  std::string what = r.body.substr(0, 300);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view error;
  if (!parser.parse(r.body).get(doc) && !doc["error"].get(error)) what = std::string(error);
  if (r.status == 408) return Status::DeadlineExceeded(what);
  if (r.status == 413) return Status::ResourceExhausted(what);
  return Status::Unavailable("HTTP " + std::to_string(r.status) + ": " + what);
}

// A peer's match-set answer, or what went wrong (transport, HTTP status, corrupt body).
Result<query::MatchSet> PeerMatches(const Result<http::ClientResponse>& r) {
  if (!r.ok()) return r.status();
  if (r->status != 200) return PeerFailure(*r);
  return query::DecodeMatchSet(r->body);
}

Result<query::PartialResult> PeerPartial(const Result<http::ClientResponse>& r) {
  if (!r.ok()) return r.status();
  if (r->status != 200) return PeerFailure(*r);
  return query::DecodePartial(r->body);
}

bool IsLimit(const Status& st) {
  return st.code() == StatusCode::kDeadlineExceeded ||
         st.code() == StatusCode::kResourceExhausted || st.code() == StatusCode::kCancelled;
}

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
  auto decoded = DecodeInternalQuery(req.body);
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

int64_t Server::Impl::ChooseHolder(const SegmentRecord& seg,
                                   const std::set<std::pair<int64_t, int64_t>>& excluded) const {
  if (seg.replicas.count(node) != 0 && excluded.count({seg.id.value, node.value}) == 0 &&
      store->Has(seg.file_name)) {
    return node.value;
  }
  std::vector<int64_t> alive;
  for (NodeId n : seg.replicas) {
    if (n == node || excluded.count({seg.id.value, n.value}) != 0) continue;
    auto view = membership->Find(n);
    if (view && view->alive && !view->address.empty()) alive.push_back(n.value);
  }
  if (alive.empty()) return -1;
  // Spread the segments over their live holders.
  return alive[static_cast<size_t>(seg.id.value) % alive.size()];
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
  const int64_t t0_us = clock->MonotonicMicros();
  query::ExecOptions exec;
  exec.threads = config.query_threads;
  exec.deadline = control.deadline;
  exec.cancel = control.cancel;
  exec.max_memory_bytes = control.max_memory_bytes;
  exec.progress = control.progress;
  const std::string secret = ClusterSecret();
  std::vector<std::string> warnings;
  InternalQuery base;
  base.repo = repo;
  base.query_string = query_string;
  base.range = range;
  base.query_id = RandomHex(8);
  base.max_memory_bytes = control.max_memory_bytes;
  // Peers asked for anything (cancelled when this node gives up).
  std::set<std::string> contacted;
  auto waiter = std::make_shared<PeerWaiter>();
  const auto progress_timeout = std::chrono::milliseconds(config.peer_progress_timeout_ms);
  auto post = [&](int64_t peer, const std::string& address, const char* path, InternalQuery q) {
    q.timeout_ms = RemainingMs(control);
    contacted.insert(address);
    if (control.peers_total) ++*control.peers_total;
    return PeerReply::Post(waiter, peer, address, path, q, secret, control, progress_timeout);
  };
  auto fail = [&](Status st) -> Status {
    if (!contacted.empty()) CancelPeers(base.query_id, contacted, secret);
    return st;
  };
  auto dead = [this](int64_t peer) {
    auto view = membership->Find(NodeId(peer));
    return !view || !view->alive;
  };
  auto wait_for = [&](const std::vector<PeerReply*>& replies) {
    return WaitForPeers(*waiter, replies, control, dead, config.heartbeat_timeout_ms);
  };
  // Nodes that did not answer a request of this query (no progress within
  // --peer-progress-timeout-ms, declared dead, connection failed): asked nothing more, their
  // segments read from other copies. Their addresses get a cancel at the end.
  std::set<int64_t> stalled;
  std::set<std::string> stalled_addresses;
  auto note_stalled = [&](const PeerReply& reply, const Status& why) {
    if (stalled.insert(reply.node()).second) {
      spdlog::warn(
          "query on {}: node {} did not answer ({}); reading what it was asked for "
          "elsewhere",
          repo, reply.node(), why.ToString());
    }
    stalled_addresses.insert(reply.address());
  };

  // ---- 1. buffered events, from each partition's owner ----
  // Each partition's events come from one owner's answer or from none: a partition whose owner
  // failed is asked again only of a node that took it over since (a newer claim in Global), at
  // most kOwnerRounds times; what stays unanswered is named in a warning.
  constexpr int kOwnerRounds = 3;
  auto ownership = [&] {
    std::map<int32_t, std::pair<int64_t, Epoch>> owners;  // partition -> (owner, epoch)
    global->Read([&](const GlobalState& st) {
      for (const auto& [p, ps] : st.partitions) {
        if (ps.epoch.value > 0) owners[p] = {ps.owner.value, ps.epoch};
      }
    });
    return owners;
  };
  std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>> by_owner;
  for (const auto& [p, oe] : ownership()) {
    by_owner[oe.first].emplace_back(PartitionId(p), oe.second);
  }
  std::vector<query::BufferedSource> buffered;
  int64_t need_applied = -1;
  struct BufferCall {
    std::vector<std::pair<PartitionId, Epoch>> partitions;
    PeerReply reply;
  };
  for (int round = 0; !by_owner.empty(); ++round) {
    std::vector<BufferCall> buffer_calls;
    for (const auto& [owner, parts] : by_owner) {
      std::vector<int64_t> ids;
      for (const auto& [p, e] : parts) ids.push_back(p.value);
      if (owner == node.value) {
        std::map<int32_t, Epoch> want;
        std::vector<PartitionId> only;
        for (const auto& [p, e] : parts) {
          want[p.value] = e;
          only.push_back(p);
        }
        const std::set<int32_t> served = ServedPartitions(*digest, want);
        for (auto& b : digest->SnapshotBuffers(&only)) {
          auto it = want.find(b.partition.value);
          if (it == want.end() || it->second != b.epoch) continue;
          buffered.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
        }
        const std::vector<int64_t> missing = MissingPartitions(want, served);
        if (!missing.empty()) {
          warnings.push_back("partitions " + JoinInts(missing) +
                             ": this node is still claiming them; their newest events (not yet in "
                             "segments) may be missing");
        }
        continue;
      }
      auto view = membership->Find(NodeId(owner));
      if (!view || !view->alive || view->address.empty() || stalled.count(owner) != 0) {
        warnings.push_back("partitions " + JoinInts(ids) + ": owner node " + std::to_string(owner) +
                           " is down; their newest events (not yet in segments) are missing until "
                           "another node takes them over");
        continue;
      }
      InternalQuery q = base;
      q.partitions = parts;
      buffer_calls.push_back(
          BufferCall{parts, post(owner, view->address, "/internal/v1/query/buffers", q)});
    }
    by_owner.clear();
    std::vector<PeerReply*> replies;
    for (auto& call : buffer_calls) replies.push_back(&call.reply);
    if (Status st = wait_for(replies); !st.ok()) return fail(st);
    std::map<int32_t, std::pair<int64_t, Epoch>> now_owners;
    for (auto& call : buffer_calls) {
      const int64_t owner = call.reply.node();
      auto r = call.reply.Take(control);
      auto set = PeerMatches(r);
      if (!set.ok() && IsLimit(set.status())) {
        return fail(set.status().WithContext("node " + std::to_string(owner)));
      }
      if (!set.ok()) {
        if (!r.ok()) note_stalled(call.reply, r.status());
        // Partitions taken over since Global was read are asked of their new owner.
        if (now_owners.empty()) now_owners = ownership();
        std::vector<int64_t> missing, moved;
        for (const auto& [p, e] : call.partitions) {
          auto it = now_owners.find(p.value);
          if (round + 1 < kOwnerRounds && it != now_owners.end() && it->second.second > e &&
              stalled.count(it->second.first) == 0) {
            by_owner[it->second.first].emplace_back(p, it->second.second);
            moved.push_back(p.value);
          } else {
            missing.push_back(p.value);
          }
        }
        if (!moved.empty()) {
          spdlog::info(
              "query on {}: asking the new owners of partitions {} (owner node {} did "
              "not answer)",
              repo, JoinInts(moved), owner);
        }
        if (!missing.empty()) {
          warnings.push_back("partitions " + JoinInts(missing) + ": owner node " +
                             std::to_string(owner) + " did not answer (" + set.status().ToString() +
                             "); their newest events (not yet in segments) are missing");
        }
        continue;
      }
      for (auto& src : set->sources) buffered.push_back(std::move(src));
      for (auto& w : set->warnings) warnings.push_back(std::move(w));
      const std::string applied = HeaderOf(*r, "X-Sediment-Global-Applied");
      if (!applied.empty()) need_applied = std::max<int64_t>(need_applied, std::stoll(applied));
      const std::string missing = HeaderOf(*r, "X-Sediment-Missing-Partitions");
      if (!missing.empty()) {
        warnings.push_back("partitions " + missing + ": owner node " + std::to_string(owner) +
                           " is still claiming them; their newest events (not yet in segments) "
                           "may be missing");
      }
    }
  }

  // ---- 2. Global at least as new as every owner's snapshot ----
  if (need_applied > global->Applied().value &&
      !global->WaitApplied(Offset(need_applied), kGlobalWait)) {
    warnings.push_back("this node's metadata lags the partition owners' (applied " +
                       std::to_string(global->Applied().value) + " < " +
                       std::to_string(need_applied) +
                       "); events flushed in the last moments may be missing");
  }
  // Copies not to read in a later attempt, (segment, holder): found unreadable, or held by a node
  // that did not answer.
  std::set<std::pair<int64_t, int64_t>> excluded;
  // Segments this query already read through the bucket (fetched into this node's cache). A
  // copy of this node found unreadable excludes the bucket route only when it came from there: a
  // damaged local copy is withdrawn and deleted (Replicator::ReportCorrupt), so a bucket fetch
  // installs a good one.
  std::set<int64_t> via_bucket;
  CoordinatedResult out;
  constexpr int kMaxAttempts = 2;  // re-runs after the first attempt
  std::vector<std::string> attempt_warnings;
  std::vector<query::PartialResult> partials;
  for (int attempt = 0;; ++attempt) {
    attempt_warnings.clear();
    partials.clear();
    query::ScanInput input;
    std::map<std::pair<std::string, int32_t>, Position> flushed;
    std::map<int64_t, std::vector<SegmentRecord>> remote;  // holder node -> segments
    std::vector<SegmentRecord> unreachable;
    std::vector<SegmentRecord> in_bucket;  // no readable copy on a live node, but uploaded
    std::vector<std::string> local_files;
    global->Read([&](const GlobalState& st) {
      for (const auto& [id, seg] : st.segments) {
        if (seg.datasource.repo != repo || seg.staged()) continue;
        if (seg.max_ts < range.start_ms || seg.min_ts >= range.end_ms) continue;
        for (NodeId n : seg.replicas) {
          if (stalled.count(n.value) != 0) excluded.insert({seg.id.value, n.value});
        }
        const int64_t holder = ChooseHolder(seg, excluded);
        if (holder < 0 && seg.uploaded && bucket &&
            (excluded.count({seg.id.value, node.value}) == 0 ||
             via_bucket.count(seg.id.value) == 0)) {
          in_bucket.push_back(seg);
        } else if (holder < 0) {
          unreachable.push_back(seg);
        } else if (holder == node.value) {
          input.segments.push_back(SegmentSourceOf(seg, segment_dir));
          local_files.push_back(seg.file_name);
        } else {
          remote[holder].push_back(seg);
        }
      }
      flushed = st.flushed_through;
    });

    // ---- 3. segments held by other nodes: their partial states (they work while this node
    // scans its own input) ----
    struct SegmentCall {
      int64_t node;
      std::vector<SegmentRecord> segments;
      PeerReply reply;
    };
    std::vector<SegmentCall> segment_calls;
    for (auto& [holder, segs] : remote) {
      auto view = membership->Find(NodeId(holder));
      InternalQuery q = base;
      for (const auto& seg : segs) {
        q.segments.push_back(seg.id);
        q.segment_files.push_back(seg.file_name);
      }
      segment_calls.push_back(SegmentCall{
          holder, std::move(segs),
          post(holder, view ? view->address : "", "/internal/v1/query/partial", std::move(q))});
    }

    // Segments only the bucket holds (evicted everywhere, or every holder is down) are fetched
    // into this node's cache and read here; the answer's metadata says how many.
    std::vector<SegmentStore::PinHandle> extra_pins;
    auto from_bucket = [&](const SegmentRecord& seg, query::ScanInput* into) -> bool {
      // Pinned before the fetch: the cache eviction cannot delete it before this query read it.
      extra_pins.push_back(store->Pin({seg.file_name}));
      via_bucket.insert(seg.id.value);
      auto got = replicator->EnsureLocal(seg);
      if (!got.ok()) {
        attempt_warnings.push_back(
            DescribeSegments({seg}) +
            " could not be fetched from the bucket: " + got.status().ToString());
        return false;
      }
      if (got->fetched) {
        ++out.bucket_fetches;
        out.bucket_fetched_bytes += got->bytes;
      }
      into->segments.push_back(SegmentSourceOf(seg, segment_dir));
      return true;
    };
    for (const auto& seg : in_bucket) (void)from_bucket(seg, &input);
    // Local files stay on disk while this query reads them (a merge or retention may remove them
    // from Global meanwhile).
    SegmentStore::PinHandle pin = store->Pin(local_files);
    if (!unreachable.empty()) {
      std::set<int64_t> holders;
      for (const auto& seg : unreachable) {
        for (NodeId n : seg.replicas) holders.insert(n.value);
      }
      std::vector<int64_t> silent;
      for (int64_t n : holders) {
        if (stalled.count(n) != 0) silent.push_back(n);
      }
      attempt_warnings.push_back(
          DescribeSegments(unreachable) + " could not be searched: no live node holds a readable " +
          "copy (holders: " + JoinInts(std::vector<int64_t>(holders.begin(), holders.end())) +
          (silent.empty() ? "" : "; did not answer: " + JoinInts(silent)) + ")");
    }

    // ---- 4. the cut: buffered events above flushed_through only ----
    for (auto& b : buffered) {
      if (b.datasource.repo != repo || b.events == nullptr) continue;
      auto ft = flushed.find({b.datasource.Key(), b.partition.value});
      std::shared_ptr<const std::vector<PositionedEvent>> events = b.events;
      if (ft != flushed.end() && !events->empty() && events->front().pos <= ft->second) {
        auto cut = std::make_shared<std::vector<PositionedEvent>>();
        for (const auto& e : *events) {
          if (e.pos > ft->second) cut->push_back(e);
        }
        events = std::move(cut);
      }
      if (events->empty()) continue;
      input.buffered.push_back(query::BufferedSource{b.datasource, b.partition, events});
    }

    // ---- 5. this node's partial state ----
    bool retry = false;
    auto note_local = [&](query::PartialResult& p) {
      for (SegmentId id : p.unreadable_segments) {
        // A corrupt or missing local copy: dropped from Global (and fetched again from a good
        // one by the replicator); this query is run again on another copy.
        if (replicator) {
          replicator->ReportCorrupt(id, Status::Corruption("a query could not read it"));
        }
        excluded.insert({id.value, node.value});
        retry = true;
      }
    };
    auto local = query::ExecutePartial(env, compiled, range, input, exec);
    if (!local.ok()) return fail(local.status());
    note_local(*local);
    partials.push_back(std::move(*local));

    // ---- 6. the peers' partial states ----
    query::ScanInput fallback;  // segments of failed holders, read from the bucket here
    std::vector<PeerReply*> replies;
    for (auto& call : segment_calls) replies.push_back(&call.reply);
    if (Status st = wait_for(replies); !st.ok()) return fail(st);
    for (auto& call : segment_calls) {
      auto reply = call.reply.Take(control);
      auto part = PeerPartial(reply);
      if (!part.ok() && IsLimit(part.status())) {
        return fail(part.status().WithContext("node " + std::to_string(call.node)));
      }
      if (!part.ok() && !reply.ok()) note_stalled(call.reply, reply.status());
      if (!part.ok() && attempt < kMaxAttempts) {
        // The holder failed: the next attempt reads other copies of its segments (another live
        // holder, this node's, the bucket), as for unreadable copies; nothing of this attempt
        // is kept, so no segment is counted twice.
        for (const auto& seg : call.segments) excluded.insert({seg.id.value, call.node});
        retry = true;
        continue;
      }
      if (!part.ok()) {
        // The holder failed in the last attempt: segments in the bucket are read from there.
        std::vector<SegmentRecord> failed;
        for (const auto& seg : call.segments) {
          if (!seg.uploaded || !bucket || !from_bucket(seg, &fallback)) failed.push_back(seg);
        }
        if (!failed.empty()) {
          attempt_warnings.push_back(DescribeSegments(failed) + " on node " +
                                     std::to_string(call.node) +
                                     " could not be searched: " + part.status().ToString());
        }
        continue;
      }
      for (int64_t id : SplitInts(HeaderOf(*reply, "X-Sediment-Unreadable-Segments"))) {
        excluded.insert({id, call.node});
        retry = true;
      }
      // Copies the holder no longer has (its Global is ahead of this node's): read elsewhere in
      // the next attempt; in the last one the holder's warning names them.
      for (int64_t id : SplitInts(HeaderOf(*reply, "X-Sediment-Segments-Not-Held"))) {
        excluded.insert({id, call.node});
        retry = true;
      }
      for (auto& w : part->warnings) w = "node " + std::to_string(call.node) + ": " + w;
      partials.push_back(std::move(*part));
    }
    if (!fallback.segments.empty()) {
      auto more = query::ExecutePartial(env, compiled, range, fallback, exec);
      if (!more.ok()) return fail(more.status());
      note_local(*more);
      partials.push_back(std::move(*more));
    }
    // P6: never an answer mixing a partly read copy with another copy; at most two re-runs.
    if (!retry || attempt >= kMaxAttempts) break;
    spdlog::warn(
        "query on {}: unreadable or unanswered segment copies, running it again on other "
        "copies",
        repo);
  }
  // Parts the stalled nodes may still run once they wake up.
  if (!stalled_addresses.empty()) CancelPeers(base.query_id, stalled_addresses, secret);

  // ---- 7. merge and the remaining stages ----
  auto result = query::FinishPartials(compiled, range, std::move(partials), exec);
  if (!result.ok()) return fail(result.status());
  out.result = std::move(*result);
  for (auto& w : attempt_warnings) warnings.push_back(std::move(w));
  for (auto& w : out.result.warnings) warnings.push_back(std::move(w));
  out.result.warnings.clear();
  out.warnings = std::move(warnings);
  out.result.stats.elapsed_ms = (clock->MonotonicMicros() - t0_us) / 1000;
  return out;
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
  const std::set<int32_t> served = ServedPartitions(*digest, want);
  std::vector<PartitionId> only;
  for (int32_t p : served) only.emplace_back(p);
  query::ScanInput input;
  for (auto& b : digest->SnapshotBuffers(&only)) {
    if (b.datasource.repo != q.repo || want[b.partition.value] != b.epoch) continue;
    input.buffered.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
  }
  // Read after the snapshot: the coordinator's Global must reach at least this far.
  const Offset applied = global->Applied();
  query::ExecOptions exec = PeerExecOptions(q, config.query_threads, scope.flag());
  auto set = query::CollectMatches(env, *compiled, q.range, input, exec);
  if (!set.ok()) return http::JsonError(HttpStatusFor(set.status()), set.status().message());
  http::Response r = MatchSetResponse(*set);
  r.headers.emplace_back("X-Sediment-Global-Applied", std::to_string(applied.value));
  const std::vector<int64_t> missing = MissingPartitions(want, served);
  if (!missing.empty()) r.headers.emplace_back("X-Sediment-Missing-Partitions", JoinInts(missing));
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
  return "segments " + JoinInts(not_here) + " are not held by node " + std::to_string(node.value) +
         " (removed or unknown)";
}

// Names the segments a node was asked for but does not hold (its Global no longer lists its copy:
// withdrawn as corrupt, dropped as an extra copy, merged away) in X-Sediment-Segments-Not-Held of
// `r`, so the coordinator reads another copy instead of answering without them.
void ReportNotHeld(const std::vector<int64_t>& not_here, http::Response* r) {
  if (not_here.empty()) return;
  r->headers.emplace_back("X-Sediment-Segments-Not-Held", JoinInts(not_here, SIZE_MAX));
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
  r->headers.emplace_back("X-Sediment-Unreadable-Segments", JoinInts(unreadable, SIZE_MAX));
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
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view id;
  if (parser.parse(req.body).get(doc) || doc["queryId"].get(id) || id.empty()) {
    return http::JsonError(400, "internal cancel: body must be {\"queryId\": \"...\"}");
  }
  int cancelled = 0;
  {
    std::lock_guard lock(internal_queries_mu);
    auto [lo, hi] = internal_queries.equal_range(std::string(id));
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

}  // namespace sediment
