// Queries across the cluster (docs/DESIGN.md, "Queries"). The node that receives a query is its
// coordinator:
//  1. From Global it takes each partition's owner and claim epoch, and asks every owner for the
//     matching events still in its buffers (itself directly, peers with a buffers call). An owner
//     answers only for partitions it digests under exactly that epoch, and reports the Global
//     offset it had applied when it took the snapshot.
//  2. It waits until its own Global has applied at least that offset, then reads the segment list
//     and every datasource's flushed_through from one Global state. Buffered events at or below
//     flushed_through are in a registered segment and are dropped: each event is counted once,
//     from a segment or from a buffer, while flushes and takeovers go on (one owner per partition
//     is asked; a segment registered after an owner's snapshot raises flushed_through over the
//     events it holds).
//  3. The holder of each segment computes the query's partial state over the segments it was
//     asked for (a partial call, query::ExecutePartial) and sends it back; this node computes one
//     over the segments it holds, the ones fetched from the bucket and the buffered events, and
//     merges them all (query::FinishPartials).
// P5: whatever could not be read (holder down, owner down, a peer's error) becomes a warning
// naming the segments, partitions and time ranges missing.
// A frozen peer: a call that brings no answer byte for the progress timeout, or whose node
// membership declares dead, is abandoned; that node is asked nothing more in this query, its
// segments are read from other copies in a new attempt (as for unreadable copies: nothing of the
// abandoned attempt is kept), and its partitions' buffers are asked of a node that claimed them
// since, else named in a warning.
// Limits: the deadline and memory bound of QueryControl apply here and go to the peers (the time
// that remains); a peer that reaches one fails the whole query, and a coordinator that gives up
// (limit, cancellation) asks the peers to cancel their part.
#include "coordinator/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/time_parse.h"
#include "coordinator/planner.h"
#include "query/wire.h"

namespace sediment::coordinator {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Peer calls of a query without a time limit.
constexpr auto kUnlimitedPeerTimeout = std::chrono::seconds(600);
// Rounds of asking new owners for the buffers of partitions whose owner failed.
constexpr int kOwnerRounds = 3;
// Re-runs after the first attempt when copies were unreadable or holders failed.
constexpr int kMaxAttempts = 2;

std::string RandomQueryId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  uint64_t v = rng();
  for (char& c : out) {
    c = kHex[v & 15];
    v >>= 4;
  }
  return out;
}

// Milliseconds left before `control`'s deadline (at least 1), or 0 without one.
int64_t RemainingMs(const QueryControl& control) {
  if (!control.deadline) return 0;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*control.deadline - SteadyClock::now());
  return std::max<int64_t>(1, left.count());
}

bool IsLimit(const Status& st) {
  return st.code() == StatusCode::kDeadlineExceeded ||
         st.code() == StatusCode::kResourceExhausted || st.code() == StatusCode::kCancelled;
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
  return std::to_string(segs.size()) + " segments (ids " + JoinIds(ids) + "; " +
         std::to_string(events) + " events from " + FormatIso8601Millis(lo) + " to " +
         FormatIso8601Millis(hi) + ")";
}

// One call to a peer and the slot its answer lands in; abandoned when destroyed unanswered.
class Call {
 public:
  Call(int64_t node, std::string address, std::shared_ptr<PeerSlot> slot)
      : node_(node), address_(std::move(address)), slot_(std::move(slot)) {}
  Call(Call&&) = default;
  Call& operator=(Call&&) = default;
  ~Call() {
    if (slot_) slot_->Abandon();
  }
  int64_t node() const { return node_; }
  const std::string& address() const { return address_; }
  PeerSlot& slot() { return *slot_; }
  // The answer, once WaitForCalls returned OK for this call; counts it in `control.peers_done`.
  Result<http::ClientResponse> Take(const QueryControl& control) {
    std::lock_guard lock(slot_->waiter().mu);
    if (control.peers_done) ++*control.peers_done;
    return slot_->TakeLocked();
  }

 private:
  int64_t node_;
  std::string address_;
  std::shared_ptr<PeerSlot> slot_;
};

// Waits until every call of `calls` is answered. A call whose node `dead` says membership declared
// dead meanwhile is abandoned at once, whatever its progress timeout. DeadlineExceeded /
// Cancelled when `control`'s deadline passed or it was cancelled first.
Status WaitForCalls(PeerWaiter& waiter, const std::vector<Call*>& calls,
                    const QueryControl& control, const std::function<bool(int64_t)>& dead,
                    int64_t heartbeat_timeout_ms) {
  std::unique_lock lock(waiter.mu);
  while (true) {
    bool all = true;
    for (Call* c : calls) {
      if (c->slot().ReadyLocked()) continue;
      if (dead(c->node())) {
        c->slot().AbandonLocked(Status::Unavailable(
            "node " + std::to_string(c->node()) + " was declared dead (no heartbeat for " +
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

}  // namespace

Coordinator::Coordinator(Env* env, Clock* clock, Global* global, LocalNode* local,
                         PeerClient* peers,
                         std::function<std::optional<PeerInfo>(NodeId)> find_peer,
                         CoordinatorOptions options)
    : env_(env),
      clock_(clock),
      global_(global),
      local_(local),
      peers_(peers),
      find_peer_(std::move(find_peer)),
      options_(options) {}

Result<CoordinatedResult> Coordinator::Run(const std::string& repo, const std::string& query_string,
                                           const query::CompiledQuery& compiled,
                                           const query::TimeRange& range,
                                           const QueryControl& control) {
  const int64_t t0_us = clock_->MonotonicMicros();
  const NodeId self = local_->id();
  query::ExecOptions exec;
  exec.threads = options_.query_threads;
  exec.deadline = control.deadline;
  exec.cancel = control.cancel;
  exec.max_memory_bytes = control.max_memory_bytes;
  exec.progress = control.progress;
  std::vector<std::string> warnings;
  InternalQuery base;
  base.repo = repo;
  base.query_string = query_string;
  base.range = range;
  base.query_id = RandomQueryId();
  base.max_memory_bytes = control.max_memory_bytes;
  // Peers asked for anything (cancelled when this node gives up).
  std::set<std::string> contacted;
  auto waiter = std::make_shared<PeerWaiter>();
  auto start = [&](PeerCallKind kind, int64_t peer, const std::string& address, InternalQuery q) {
    q.timeout_ms = RemainingMs(control);
    contacted.insert(address);
    if (control.peers_total) ++*control.peers_total;
    PeerCallOptions options;
    options.timeout = kUnlimitedPeerTimeout;
    // The peer stops at the deadline itself; this only bounds a peer that hangs.
    if (control.deadline) options.timeout = std::chrono::milliseconds(q.timeout_ms + 5000);
    options.progress_timeout = options_.peer_progress_timeout;
    auto slot = std::make_shared<PeerSlot>(waiter);
    peers_->Start(kind, NodeId(peer), address, q, options, slot);
    return Call(peer, address, std::move(slot));
  };
  auto fail = [&](Status st) -> Status {
    if (!contacted.empty()) peers_->Cancel(base.query_id, contacted);
    return st;
  };
  auto dead = [this](int64_t peer) {
    auto view = find_peer_(NodeId(peer));
    return !view || !view->alive;
  };
  auto serving = [this](NodeId n) {
    auto view = find_peer_(n);
    return view && view->alive && !view->address.empty();
  };
  auto wait_for = [&](const std::vector<Call*>& calls) {
    return WaitForCalls(*waiter, calls, control, dead, options_.heartbeat_timeout_ms);
  };
  // Nodes that did not answer a call of this query (no progress within the progress timeout,
  // declared dead, connection failed): asked nothing more, their segments read from other copies.
  // Their addresses get a cancel at the end.
  std::set<int64_t> stalled;
  std::set<std::string> stalled_addresses;
  auto note_stalled = [&](const Call& call, const Status& why) {
    if (stalled.insert(call.node()).second) {
      spdlog::warn(
          "query on {}: node {} did not answer ({}); reading what it was asked for "
          "elsewhere",
          repo, call.node(), why.ToString());
    }
    stalled_addresses.insert(call.address());
  };
  auto owners_now = [&] {
    PartitionOwners owners;
    global_->Read([&](const GlobalState& st) { owners = OwnersOf(st); });
    return owners;
  };

  // ---- 1. buffered events, from each partition's owner ----
  // Each partition's events come from one owner's answer or from none: a partition whose owner
  // failed is asked again only of a node that took it over since (a newer claim in Global), at
  // most kOwnerRounds times; what stays unanswered is named in a warning.
  std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>> by_owner;
  for (const auto& [p, oe] : owners_now()) {
    by_owner[oe.first].emplace_back(PartitionId(p), oe.second);
  }
  std::vector<query::BufferedSource> buffered;
  int64_t need_applied = -1;
  struct BufferCall {
    std::vector<std::pair<PartitionId, Epoch>> partitions;
    Call call;
  };
  for (int round = 0; !by_owner.empty(); ++round) {
    std::vector<BufferCall> buffer_calls;
    for (const auto& [owner, parts] : by_owner) {
      std::vector<int64_t> ids;
      for (const auto& [p, e] : parts) ids.push_back(p.value);
      if (owner == self.value) {
        std::map<int32_t, Epoch> want;
        for (const auto& [p, e] : parts) want[p.value] = e;
        std::vector<int64_t> not_served;
        for (auto& b : local_->Buffers(want, &not_served)) buffered.push_back(std::move(b));
        if (!not_served.empty()) {
          warnings.push_back("partitions " + JoinIds(not_served) +
                             ": this node is still claiming them; their newest events (not yet in "
                             "segments) may be missing");
        }
        continue;
      }
      auto view = find_peer_(NodeId(owner));
      if (!view || !view->alive || view->address.empty() || stalled.count(owner) != 0) {
        warnings.push_back("partitions " + JoinIds(ids) + ": owner node " + std::to_string(owner) +
                           " is down; their newest events (not yet in segments) are missing until "
                           "another node takes them over");
        continue;
      }
      InternalQuery q = base;
      q.partitions = parts;
      buffer_calls.push_back(
          BufferCall{parts, start(PeerCallKind::kBuffers, owner, view->address, q)});
    }
    by_owner.clear();
    std::vector<Call*> calls;
    for (auto& bc : buffer_calls) calls.push_back(&bc.call);
    if (Status st = wait_for(calls); !st.ok()) return fail(st);
    PartitionOwners now_owners;
    for (auto& bc : buffer_calls) {
      const int64_t owner = bc.call.node();
      auto r = bc.call.Take(control);
      auto set = PeerMatches(r);
      if (!set.ok() && IsLimit(set.status())) {
        return fail(set.status().WithContext("node " + std::to_string(owner)));
      }
      if (!set.ok()) {
        if (!r.ok()) note_stalled(bc.call, r.status());
        // Partitions taken over since Global was read are asked of their new owner.
        if (now_owners.empty()) now_owners = owners_now();
        std::vector<int64_t> missing, moved;
        for (const auto& [p, e] : bc.partitions) {
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
              repo, JoinIds(moved), owner);
        }
        if (!missing.empty()) {
          warnings.push_back("partitions " + JoinIds(missing) + ": owner node " +
                             std::to_string(owner) + " did not answer (" + set.status().ToString() +
                             "); their newest events (not yet in segments) are missing");
        }
        continue;
      }
      for (auto& src : set->sources) buffered.push_back(std::move(src));
      for (auto& w : set->warnings) warnings.push_back(std::move(w));
      const std::vector<int64_t> applied = SplitIds(HeaderOf(*r, kGlobalAppliedHeader));
      if (!applied.empty()) need_applied = std::max(need_applied, applied.front());
      const std::string missing = HeaderOf(*r, kMissingPartitionsHeader);
      if (!missing.empty()) {
        warnings.push_back("partitions " + missing + ": owner node " + std::to_string(owner) +
                           " is still claiming them; their newest events (not yet in segments) "
                           "may be missing");
      }
    }
  }

  // ---- 2. Global at least as new as every owner's snapshot ----
  if (need_applied > global_->Applied().value &&
      !global_->WaitApplied(Offset(need_applied), options_.global_wait)) {
    warnings.push_back("this node's metadata lags the partition owners' (applied " +
                       std::to_string(global_->Applied().value) + " < " +
                       std::to_string(need_applied) +
                       "); events flushed in the last moments may be missing");
  }
  // Copies not to read in a later attempt, (segment, holder): found unreadable, or held by a node
  // that did not answer.
  std::set<std::pair<int64_t, int64_t>> excluded;
  // Segments this query already read through the bucket (fetched into this node's cache). A copy
  // of this node found unreadable excludes the bucket route only when it came from there: a
  // damaged local copy is withdrawn and deleted (ReportUnreadable), so a bucket fetch installs a
  // good one.
  std::set<int64_t> via_bucket;
  PlanContext plan_ctx;
  plan_ctx.self = self;
  plan_ctx.has_bucket = local_->HasBucket();
  plan_ctx.excluded = &excluded;
  plan_ctx.stalled = &stalled;
  plan_ctx.via_bucket = &via_bucket;
  plan_ctx.holds_file = [this](const std::string& f) { return local_->HoldsFile(f); };
  plan_ctx.serving = serving;
  CoordinatedResult out;
  std::vector<std::string> attempt_warnings;
  std::vector<query::PartialResult> partials;
  for (int attempt = 0;; ++attempt) {
    attempt_warnings.clear();
    partials.clear();
    SegmentPlan plan;
    std::map<std::pair<std::string, int32_t>, Position> flushed;
    global_->Read([&](const GlobalState& st) {
      plan = PlanSegments(st, repo, range, plan_ctx);
      flushed = st.flushed_through;
    });
    query::ScanInput input;
    std::vector<std::string> local_files;
    for (const auto& seg : plan.local) {
      input.segments.push_back(local_->SourceOf(seg));
      local_files.push_back(seg.file_name);
    }

    // ---- 3. segments held by other nodes: their partial states (they work while this node
    // scans its own input) ----
    struct SegmentCall {
      std::vector<SegmentRecord> segments;
      Call call;
    };
    std::vector<SegmentCall> segment_calls;
    for (auto& [holder, segs] : plan.remote) {
      auto view = find_peer_(NodeId(holder));
      InternalQuery q = base;
      for (const auto& seg : segs) {
        q.segments.push_back(seg.id);
        q.segment_files.push_back(seg.file_name);
      }
      segment_calls.push_back(SegmentCall{
          std::move(segs),
          start(PeerCallKind::kPartial, holder, view ? view->address : "", std::move(q))});
    }

    // Segments only the bucket holds (evicted everywhere, or every holder is down) are fetched
    // into this node's cache and read here; the answer's metadata says how many.
    std::vector<std::shared_ptr<void>> extra_pins;
    auto from_bucket = [&](const SegmentRecord& seg, query::ScanInput* into) -> bool {
      // Pinned before the fetch: the cache eviction cannot delete it before this query read it.
      extra_pins.push_back(local_->Pin({seg.file_name}));
      via_bucket.insert(seg.id.value);
      auto got = local_->FetchFromBucket(seg);
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
      into->segments.push_back(local_->SourceOf(seg));
      return true;
    };
    for (const auto& seg : plan.from_bucket) (void)from_bucket(seg, &input);
    // Local files stay on disk while this query reads them (a merge or retention may remove them
    // from Global meanwhile).
    std::shared_ptr<void> pin = local_->Pin(local_files);
    if (!plan.unreachable.empty()) {
      std::set<int64_t> holders;
      for (const auto& seg : plan.unreachable) {
        for (NodeId n : seg.replicas) holders.insert(n.value);
      }
      std::vector<int64_t> silent;
      for (int64_t n : holders) {
        if (stalled.count(n) != 0) silent.push_back(n);
      }
      attempt_warnings.push_back(
          DescribeSegments(plan.unreachable) +
          " could not be searched: no live node holds a readable copy (holders: " +
          JoinIds(std::vector<int64_t>(holders.begin(), holders.end())) +
          (silent.empty() ? "" : "; did not answer: " + JoinIds(silent)) + ")");
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
        // A corrupt or missing local copy: withdrawn (and fetched again from a good one); this
        // query is run again on another copy.
        local_->ReportUnreadable(id);
        excluded.insert({id.value, self.value});
        retry = true;
      }
    };
    auto local = query::ExecutePartial(env_, compiled, range, input, exec);
    if (!local.ok()) return fail(local.status());
    note_local(*local);
    partials.push_back(std::move(*local));

    // ---- 6. the peers' partial states ----
    query::ScanInput fallback;  // segments of failed holders, read from the bucket here
    std::vector<Call*> calls;
    for (auto& sc : segment_calls) calls.push_back(&sc.call);
    if (Status st = wait_for(calls); !st.ok()) return fail(st);
    for (auto& sc : segment_calls) {
      const int64_t holder = sc.call.node();
      auto reply = sc.call.Take(control);
      auto part = PeerPartial(reply);
      if (!part.ok() && IsLimit(part.status())) {
        return fail(part.status().WithContext("node " + std::to_string(holder)));
      }
      if (!part.ok() && !reply.ok()) note_stalled(sc.call, reply.status());
      if (!part.ok() && attempt < kMaxAttempts) {
        // The holder failed: the next attempt reads other copies of its segments (another live
        // holder, this node's, the bucket), as for unreadable copies; nothing of this attempt is
        // kept, so no segment is counted twice.
        for (const auto& seg : sc.segments) excluded.insert({seg.id.value, holder});
        retry = true;
        continue;
      }
      if (!part.ok()) {
        // The holder failed in the last attempt: segments in the bucket are read from there.
        std::vector<SegmentRecord> failed;
        for (const auto& seg : sc.segments) {
          if (!seg.uploaded || !plan_ctx.has_bucket || !from_bucket(seg, &fallback)) {
            failed.push_back(seg);
          }
        }
        if (!failed.empty()) {
          attempt_warnings.push_back(DescribeSegments(failed) + " on node " +
                                     std::to_string(holder) +
                                     " could not be searched: " + part.status().ToString());
        }
        continue;
      }
      for (int64_t id : SplitIds(HeaderOf(*reply, kUnreadableSegmentsHeader))) {
        excluded.insert({id, holder});
        retry = true;
      }
      // Copies the holder no longer has (its Global is ahead of this node's): read elsewhere in
      // the next attempt; in the last one the holder's warning names them.
      for (int64_t id : SplitIds(HeaderOf(*reply, kSegmentsNotHeldHeader))) {
        excluded.insert({id, holder});
        retry = true;
      }
      for (auto& w : part->warnings) w = "node " + std::to_string(holder) + ": " + w;
      partials.push_back(std::move(*part));
    }
    if (!fallback.segments.empty()) {
      auto more = query::ExecutePartial(env_, compiled, range, fallback, exec);
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
  if (!stalled_addresses.empty()) peers_->Cancel(base.query_id, stalled_addresses);

  // ---- 7. merge and the remaining stages ----
  auto result = query::FinishPartials(compiled, range, std::move(partials), exec);
  if (!result.ok()) return fail(result.status());
  out.result = std::move(*result);
  for (auto& w : attempt_warnings) warnings.push_back(std::move(w));
  for (auto& w : out.result.warnings) warnings.push_back(std::move(w));
  out.result.warnings.clear();
  out.warnings = std::move(warnings);
  out.result.stats.elapsed_ms = (clock_->MonotonicMicros() - t0_us) / 1000;
  return out;
}

}  // namespace sediment::coordinator
