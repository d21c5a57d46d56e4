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
//  3. Segments held here are scanned here; for the others, the holder runs the filter
//     (/internal/v1/query/segments) and sends back the matching events. The whole query then runs
//     here over local segments plus every matching event gathered.
// P5: whatever could not be read (holder down, owner down, a peer's error) becomes an
// X-Sediment-Warning naming the segments, partitions and time ranges missing.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <strings.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "query/wire.h"
#include "segment/segment.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

constexpr auto kPeerTimeout = std::chrono::seconds(60);
constexpr auto kGlobalWait = std::chrono::seconds(5);

// Body of the internal query requests.
struct InternalQuery {
  std::string repo;
  std::string query_string;
  query::TimeRange range;
  std::vector<std::pair<PartitionId, Epoch>> partitions;  // buffers
  std::vector<SegmentId> segments;                        // segments
  std::vector<std::string> segment_files;                 // their file names (same order)
  size_t max_events = SIZE_MAX;
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

// Parses the public query body: queryString, start, end.
std::optional<http::Response> ParseQueryBody(const std::string& body, std::string* query_string,
                                             std::string* start, std::string* end) {
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
    *query_string = std::string(qs);
    auto bound = [&](const char* name, std::string* out) -> std::optional<std::string> {
      simdjson::dom::element v;
      if (doc[name].get(v)) return std::nullopt;
      if (v.is_string()) {
        *out = std::string(v.get_string().value());
      } else if (v.is_int64()) {
        *out = std::to_string(v.get_int64().value());
      } else if (v.is_uint64()) {
        *out = std::to_string(v.get_uint64().value());
      } else {
        return std::string("'") + name + "' must be a string or epoch milliseconds";
      }
      return std::nullopt;
    };
    if (auto e = bound("start", start)) return http::JsonError(400, *e);
    if (auto e = bound("end", end)) return http::JsonError(400, *e);
    bool live = false;
    if (!doc["isLive"].get(live) && live) {
      return http::JsonError(400, "live queries (isLive: true) are not supported yet");
    }
  } catch (const simdjson::simdjson_error& e) {
    return http::JsonError(400, std::string("query body: ") + e.what());
  }
  return std::nullopt;
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

// POSTs an internal query to a peer on its own thread.
std::future<Result<http::ClientResponse>> PostToPeer(const std::string& address,
                                                     const std::string& path,
                                                     const InternalQuery& q,
                                                     const std::string& secret) {
  return std::async(std::launch::async, [url = "http://" + address + path,
                                         body = EncodeInternalQuery(q), secret] {
    return http::Fetch(
        "POST", url, {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}},
        body, kPeerTimeout);
  });
}

// A peer's match-set answer, or what went wrong (transport, HTTP status, corrupt body).
Result<query::MatchSet> PeerMatches(const Result<http::ClientResponse>& r) {
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return Status::Unavailable("HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300));
  }
  return query::DecodeMatchSet(r->body);
}

http::Response MatchSetResponse(const query::MatchSet& set) {
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = query::EncodeMatchSet(set);
  return r;
}

}  // namespace

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

http::Response Server::Impl::HandleQuery(const http::Request& req, const std::string& repo) {
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

  std::string query_string, start, end;
  if (auto err = ParseQueryBody(req.body, &query_string, &start, &end)) return *err;
  auto range = query::ParseTimeRange(start, end, clock->NowMillis());
  if (!range.ok()) return http::JsonError(400, range.status().message());
  auto compiled = query::Compile(query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());

  query::ExecOptions exec;
  exec.threads = config.query_threads;
  const size_t remote_max = query::IsAggregate(**compiled) ? SIZE_MAX : exec.max_events;
  std::vector<std::string> warnings;
  InternalQuery base;
  base.repo = repo;
  base.query_string = query_string;
  base.range = *range;
  base.max_events = remote_max;

  // ---- 1. buffered events, from each partition's owner ----
  std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>> by_owner;
  global->Read([&](const GlobalState& st) {
    for (const auto& [p, ps] : st.partitions) {
      if (ps.epoch.value > 0) by_owner[ps.owner.value].emplace_back(PartitionId(p), ps.epoch);
    }
  });
  std::vector<query::BufferedSource> buffered;
  int64_t need_applied = -1;
  struct PeerCall {
    int64_t node;
    std::vector<int64_t> partitions;
    std::future<Result<http::ClientResponse>> reply;
  };
  std::vector<PeerCall> buffer_calls;
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
      std::set<int32_t> served;
      for (const auto& st : digest->PartitionStatuses()) {
        auto it = want.find(st.partition.value);
        if (st.claimed && it != want.end() && it->second == st.epoch) served.insert(it->first);
      }
      for (auto& b : digest->SnapshotBuffers(&only)) {
        auto it = want.find(b.partition.value);
        if (it == want.end() || it->second != b.epoch) continue;
        buffered.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
      }
      std::vector<int64_t> missing;
      for (const auto& [p, e] : want) {
        if (served.count(p) == 0) missing.push_back(p);
      }
      if (!missing.empty()) {
        warnings.push_back("partitions " + JoinInts(missing) +
                           ": this node is still claiming them; their newest events (not yet in "
                           "segments) may be missing");
      }
      continue;
    }
    auto view = membership->Find(NodeId(owner));
    if (!view || !view->alive || view->address.empty()) {
      warnings.push_back("partitions " + JoinInts(ids) + ": owner node " + std::to_string(owner) +
                         " is down; their newest events (not yet in segments) are missing until "
                         "another node takes them over");
      continue;
    }
    InternalQuery q = base;
    q.partitions = parts;
    buffer_calls.push_back(PeerCall{
        owner, ids, PostToPeer(view->address, "/internal/v1/query/buffers", q, ClusterSecret())});
  }
  for (auto& call : buffer_calls) {
    auto r = call.reply.get();
    auto set = PeerMatches(r);
    if (!set.ok()) {
      warnings.push_back("partitions " + JoinInts(call.partitions) + ": owner node " +
                         std::to_string(call.node) + " did not answer (" + set.status().ToString() +
                         "); their newest events (not yet in segments) are missing");
      continue;
    }
    for (auto& src : set->sources) buffered.push_back(std::move(src));
    for (auto& w : set->warnings) warnings.push_back(std::move(w));
    const std::string applied = HeaderOf(*r, "X-Sediment-Global-Applied");
    if (!applied.empty()) need_applied = std::max<int64_t>(need_applied, std::stoll(applied));
    const std::string missing = HeaderOf(*r, "X-Sediment-Missing-Partitions");
    if (!missing.empty()) {
      warnings.push_back("partitions " + missing + ": owner node " + std::to_string(call.node) +
                         " is still claiming them; their newest events (not yet in segments) may "
                         "be missing");
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
  // Copies that turned out unreadable in an earlier attempt: (segment, holder).
  std::set<std::pair<int64_t, int64_t>> excluded;
  uint64_t bucket_fetches = 0, bucket_fetched_bytes = 0;
  std::vector<std::string> attempt_warnings;
  Result<query::QueryResult> result = Status::Internal("query not run");
  for (int attempt = 0;; ++attempt) {
    attempt_warnings.clear();
    query::ScanInput input;
    std::map<std::pair<std::string, int32_t>, Position> flushed;
    std::map<int64_t, std::vector<SegmentRecord>> remote;  // holder node -> segments
    std::vector<SegmentRecord> unreachable;
    std::vector<SegmentRecord> in_bucket;  // no readable copy on a live node, but uploaded
    std::vector<std::string> local_files;
    global->Read([&](const GlobalState& st) {
      for (const auto& [id, seg] : st.segments) {
        if (seg.datasource.repo != repo || seg.staged()) continue;
        if (seg.max_ts < range->start_ms || seg.min_ts >= range->end_ms) continue;
        const int64_t holder = ChooseHolder(seg, excluded);
        if (holder < 0 && seg.uploaded && bucket &&
            excluded.count({seg.id.value, node.value}) == 0) {
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
    // Segments only the bucket holds (evicted everywhere, or every holder is down) are fetched
    // into this node's cache and read here; the answer's metadata says how many.
    std::vector<SegmentStore::PinHandle> extra_pins;
    auto from_bucket = [&](const SegmentRecord& seg) -> bool {
      // Pinned before the fetch: the cache eviction cannot delete it before this query read it.
      extra_pins.push_back(store->Pin({seg.file_name}));
      auto got = replicator->EnsureLocal(seg);
      if (!got.ok()) {
        attempt_warnings.push_back(
            DescribeSegments({seg}) +
            " could not be fetched from the bucket: " + got.status().ToString());
        return false;
      }
      if (got->fetched) {
        ++bucket_fetches;
        bucket_fetched_bytes += got->bytes;
      }
      input.segments.push_back(SegmentSourceOf(seg, segment_dir));
      return true;
    };
    for (const auto& seg : in_bucket) (void)from_bucket(seg);
    // Local files stay on disk while this query reads them (a merge or retention may remove them
    // from Global meanwhile).
    SegmentStore::PinHandle pin = store->Pin(local_files);
    if (!unreachable.empty()) {
      std::set<int64_t> holders;
      for (const auto& seg : unreachable) {
        for (NodeId n : seg.replicas) holders.insert(n.value);
      }
      attempt_warnings.push_back(
          DescribeSegments(unreachable) + " could not be searched: no live node holds a readable " +
          "copy (holders: " + JoinInts(std::vector<int64_t>(holders.begin(), holders.end())) + ")");
    }

    // ---- 3. the cut: buffered events above flushed_through only ----
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

    // ---- 4. segments held by other nodes ----
    struct SegmentCall {
      int64_t node;
      std::vector<SegmentRecord> segments;
      std::future<Result<http::ClientResponse>> reply;
    };
    std::vector<SegmentCall> segment_calls;
    for (auto& [holder, segs] : remote) {
      auto view = membership->Find(NodeId(holder));
      InternalQuery q = base;
      for (const auto& seg : segs) {
        q.segments.push_back(seg.id);
        q.segment_files.push_back(seg.file_name);
      }
      segment_calls.push_back(
          SegmentCall{holder, std::move(segs),
                      PostToPeer(view ? view->address : "", "/internal/v1/query/segments", q,
                                 ClusterSecret())});
    }
    bool retry = false;
    for (auto& call : segment_calls) {
      auto reply = call.reply.get();
      auto set = PeerMatches(reply);
      if (!set.ok()) {
        // The holder failed: segments in the bucket are read from there instead.
        std::vector<SegmentRecord> failed;
        for (const auto& seg : call.segments) {
          if (!seg.uploaded || !bucket || !from_bucket(seg)) failed.push_back(seg);
        }
        if (!failed.empty()) {
          attempt_warnings.push_back(DescribeSegments(failed) + " on node " +
                                     std::to_string(call.node) +
                                     " could not be searched: " + set.status().ToString());
        }
        continue;
      }
      for (int64_t id : SplitInts(HeaderOf(*reply, "X-Sediment-Unreadable-Segments"))) {
        excluded.insert({id, call.node});
        retry = true;
      }
      for (auto& src : set->sources) input.buffered.push_back(std::move(src));
      for (auto& w : set->warnings) {
        attempt_warnings.push_back("node " + std::to_string(call.node) + ": " + w);
      }
      if (set->truncated) {
        attempt_warnings.push_back("node " + std::to_string(call.node) + " sent the first " +
                                   std::to_string(remote_max) +
                                   " matching events only; narrow the search or the time range");
      }
    }

    // ---- 5. run the query here ----
    result = query::Execute(env, **compiled, *range, input, exec);
    if (!result.ok()) break;
    for (SegmentId id : result->unreadable_segments) {
      // A corrupt or missing local copy: dropped from Global (and fetched again from a good one
      // by the replicator); this query is run again on another copy.
      if (replicator) {
        replicator->ReportCorrupt(id, Status::Corruption("a query could not read it"));
      }
      excluded.insert({id.value, node.value});
      retry = true;
    }
    // P6: never an answer mixing a partly read copy with another copy; at most two re-runs.
    if (!retry || attempt >= 2) break;
    spdlog::warn("query on {}: unreadable segment copies, running it again on other copies", repo);
  }
  if (!result.ok()) {
    return http::JsonError(HttpStatusFor(result.status()), result.status().message());
  }
  for (auto& w : attempt_warnings) warnings.push_back(std::move(w));
  for (auto& w : result->warnings) warnings.push_back(std::move(w));
  for (const auto& w : warnings) spdlog::warn("query '{}' on {}: {}", query_string, repo, w);

  http::Response r;
  bool ndjson = req.Header("Accept").find("application/x-ndjson") != std::string_view::npos;
  if (ndjson) {
    r.content_type = "application/x-ndjson";
    for (const auto& row : result->rows) {
      JsonWriter w;
      WriteRowJson(w, row);
      r.body.append(w.str());
      r.body.push_back('\n');
    }
  } else {
    JsonWriter w;
    w.BeginArray();
    for (const auto& row : result->rows) WriteRowJson(w, row);
    w.EndArray();
    r.body = w.Take();
  }
  for (const auto& warning : warnings) {
    r.headers.emplace_back("X-Sediment-Warning", warning);
  }
  r.headers.emplace_back("X-Sediment-Events-Scanned", std::to_string(result->stats.events_scanned));
  if (bucket) {
    r.headers.emplace_back("X-Sediment-Bucket-Fetches", std::to_string(bucket_fetches));
    r.headers.emplace_back("X-Sediment-Bucket-Fetched-Bytes", std::to_string(bucket_fetched_bytes));
  }
  return r;
}

http::Response Server::Impl::HandleInternalBuffers(const http::Request& req) {
  auto q = DecodeInternalQuery(req.body);
  if (!q.ok()) return http::JsonError(400, q.status().message());
  auto compiled = query::Compile(q->query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  std::map<int32_t, Epoch> want;
  for (const auto& [p, e] : q->partitions) want[p.value] = e;
  std::set<int32_t> served;
  for (const auto& st : digest->PartitionStatuses()) {
    auto it = want.find(st.partition.value);
    if (st.claimed && it != want.end() && it->second == st.epoch) served.insert(it->first);
  }
  std::vector<PartitionId> only;
  for (int32_t p : served) only.emplace_back(p);
  query::ScanInput input;
  for (auto& b : digest->SnapshotBuffers(&only)) {
    if (b.datasource.repo != q->repo || want[b.partition.value] != b.epoch) continue;
    input.buffered.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
  }
  // Read after the snapshot: the coordinator's Global must reach at least this far.
  const Offset applied = global->Applied();
  query::ExecOptions exec;
  exec.threads = config.query_threads;
  auto set = query::CollectMatches(env, **compiled, q->range, input, exec);
  if (!set.ok()) return http::JsonError(HttpStatusFor(set.status()), set.status().message());
  http::Response r = MatchSetResponse(*set);
  r.headers.emplace_back("X-Sediment-Global-Applied", std::to_string(applied.value));
  std::vector<int64_t> missing;
  for (const auto& [p, e] : want) {
    if (served.count(p) == 0) missing.push_back(p);
  }
  if (!missing.empty()) r.headers.emplace_back("X-Sediment-Missing-Partitions", JoinInts(missing));
  return r;
}

http::Response Server::Impl::HandleInternalSegments(const http::Request& req) {
  auto q = DecodeInternalQuery(req.body);
  if (!q.ok()) return http::JsonError(400, q.status().message());
  auto compiled = query::Compile(q->query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  query::ScanInput input;
  std::vector<int64_t> not_here;
  std::vector<std::string> files;
  global->Read([&](const GlobalState& st) {
    for (size_t i = 0; i < q->segments.size(); ++i) {
      const SegmentId id = q->segments[i];
      auto it = st.segments.find(id);
      if (it != st.segments.end() && it->second.replicas.count(node) != 0) {
        input.segments.push_back(SegmentSourceOf(it->second, segment_dir));
        files.push_back(it->second.file_name);
        continue;
      }
      // Removed from Global after the coordinator read it (a merge swapped it out, retention):
      // the file stays for the deletion delay and is still read.
      const std::string& file = q->segment_files[i];
      if (it == st.segments.end() && ValidSegmentFileName(file) && store->Has(file)) {
        auto reader = SegmentReader::Open(env, store->PathOf(file));
        if (reader.ok()) {
          const SegmentInfo& info = (*reader)->info();
          query::SegmentSource src;
          src.path = store->PathOf(file);
          src.id = id;
          src.datasource = info.datasource;
          src.partition = info.partition;
          src.min_ts = info.min_ts;
          src.max_ts = info.max_ts;
          input.segments.push_back(std::move(src));
          files.push_back(file);
          continue;
        }
      }
      not_here.push_back(id.value);
    }
  });
  SegmentStore::PinHandle pin = store->Pin(files);
  query::ExecOptions exec;
  exec.threads = config.query_threads;
  auto set = query::CollectMatches(env, **compiled, q->range, input, exec, q->max_events);
  if (!set.ok()) return http::JsonError(HttpStatusFor(set.status()), set.status().message());
  if (!not_here.empty()) {
    set->warnings.push_back("segments " + JoinInts(not_here) + " are not held by node " +
                            std::to_string(node.value) + " (removed or unknown)");
  }
  std::vector<int64_t> unreadable;
  for (SegmentId id : set->unreadable_segments) {
    unreadable.push_back(id.value);
    if (replicator) replicator->ReportCorrupt(id, Status::Corruption("a query could not read it"));
  }
  http::Response r = MatchSetResponse(*set);
  if (!unreadable.empty()) {
    r.headers.emplace_back("X-Sediment-Unreadable-Segments", JoinInts(unreadable, SIZE_MAX));
  }
  return r;
}

}  // namespace sediment
