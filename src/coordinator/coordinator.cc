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

#include "common/clock.h"
#include "common/time_parse.h"
#include "coordinator/lookup_files.h"
#include "coordinator/planner.h"
#include "query/lookup.h"
#include "query/wire.h"

namespace sediment::coordinator {

QueryControl QueryLimitsFromNow(int64_t timeout_ms, uint64_t max_memory_bytes) {
  QueryControl c;
  c.timeout_ms = timeout_ms;
  if (timeout_ms > 0) {
    c.deadline = SteadyNow() + std::chrono::milliseconds(timeout_ms);
  }
  c.max_memory_bytes = static_cast<size_t>(max_memory_bytes);
  return c;
}
namespace {

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
      std::chrono::duration_cast<std::chrono::milliseconds>(*control.deadline - SteadyNow());
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
    if (control.deadline && SteadyNow() >= *control.deadline) {
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

// One run of one query: the state its phases share. Lives on the coordinating thread only.
class QueryRun {
 public:
  QueryRun(Env* env, Clock* clock, Global* global, LocalNode* local, PeerClient* peers,
           const std::function<std::optional<PeerInfo>(NodeId)>& find_peer,
           const CoordinatorOptions& options, const std::string& repo,
           const std::string& query_string, const query::CompiledQuery& compiled,
           const query::TimeRange& range, const QueryControl& control,
           const query::BoundTables& tables)
      : env_(env),
        clock_(clock),
        global_(global),
        local_(local),
        peers_(peers),
        find_peer_(find_peer),
        options_(options),
        repo_(repo),
        compiled_(compiled),
        range_(range),
        control_(control),
        self_(local->id()),
        waiter_(std::make_shared<PeerWaiter>()) {
    exec_.threads = options.query_threads;
    exec_.deadline = control.deadline;
    exec_.cancel = control.cancel;
    exec_.max_memory_bytes = control.max_memory_bytes;
    exec_.progress = control.progress;
    base_.repo = repo;
    base_.query_string = query_string;
    base_.range = range;
    base_.query_id = RandomQueryId();
    base_.max_memory_bytes = control.max_memory_bytes;
    if (query::TablesBound(compiled)) base_.tables = tables;
    plan_ctx_.self = self_;
    plan_ctx_.has_bucket = local->HasBucket();
    plan_ctx_.excluded = &excluded_;
    plan_ctx_.stalled = &stalled_;
    plan_ctx_.via_bucket = &via_bucket_;
    plan_ctx_.holds_file = [local](const std::string& f) { return local->HoldsFile(f); };
    plan_ctx_.serving = [this](NodeId n) {
      auto view = find_peer_(n);
      return view && view->serving();
    };
  }

  Result<CoordinatedResult> Run() {
    const int64_t t0_us = clock_->MonotonicMicros();
    RETURN_IF_ERROR(CollectBuffers());
    WaitForOwnersGlobal();
    for (int attempt = 0;; ++attempt) {
      bool retry = false;
      RETURN_IF_ERROR(RunAttempt(attempt, &retry));
      // P6: never an answer mixing a partly read copy with another copy; at most two re-runs.
      if (!retry || attempt >= kMaxAttempts) break;
      spdlog::warn(
          "query on {}: unreadable or unanswered segment copies, running it again on other "
          "copies",
          repo_);
    }
    // Parts the stalled nodes may still run once they wake up.
    if (!stalled_addresses_.empty()) peers_->Cancel(base_.query_id, stalled_addresses_);

    // ---- 7. merge and the remaining stages ----
    auto result = query::FinishPartials(compiled_, range_, std::move(partials_), exec_);
    if (!result.ok()) return Fail(result.status());
    out_.result = std::move(*result);
    for (auto& w : attempt_warnings_) warnings_.push_back(std::move(w));
    for (auto& w : out_.result.warnings) warnings_.push_back(std::move(w));
    out_.result.warnings.clear();
    out_.warnings = std::move(warnings_);
    out_.result.stats.elapsed_ms = (clock_->MonotonicMicros() - t0_us) / 1000;
    return std::move(out_);
  }

 private:
  // ---- 1. buffered events, from each partition's owner ----
  // Each partition's events come from one owner's answer or from none: a partition whose owner
  // failed is asked again only of a node that took it over since (a newer claim in Global), at
  // most kOwnerRounds times; what stays unanswered is named in a warning.
  Status CollectBuffers() {
    std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>> by_owner;
    for (const auto& [p, oe] : OwnersNow()) {
      by_owner[oe.first].emplace_back(PartitionId(p), oe.second);
    }
    for (int round = 0; !by_owner.empty(); ++round) {
      std::vector<BufferCall> calls = AskOwners(by_owner);
      by_owner.clear();
      std::vector<Call*> waiting;
      for (auto& bc : calls) waiting.push_back(&bc.call);
      if (Status st = WaitFor(waiting); !st.ok()) return Fail(st);
      PartitionOwners now_owners;
      for (auto& bc : calls) {
        RETURN_IF_ERROR(TakeBuffers(bc, round, &now_owners, &by_owner));
      }
    }
    return Status::OK();
  }

  struct BufferCall {
    std::vector<std::pair<PartitionId, Epoch>> partitions;
    Call call;
  };

  // Reads this node's own partitions directly and starts a buffers call to every other owner that
  // is serving; an owner that is not is named in a warning.
  std::vector<BufferCall> AskOwners(
      const std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>>& by_owner) {
    std::vector<BufferCall> calls;
    for (const auto& [owner, parts] : by_owner) {
      std::vector<int64_t> ids;
      for (const auto& [p, e] : parts) ids.push_back(p.value);
      if (owner == self_.value) {
        std::map<int32_t, Epoch> want;
        for (const auto& [p, e] : parts) want[p.value] = e;
        std::vector<int64_t> not_served;
        for (auto& b : local_->Buffers(want, &not_served)) buffered_.push_back(std::move(b));
        if (!not_served.empty()) {
          warnings_.push_back("partitions " + JoinIds(not_served) +
                              ": this node is still claiming them; their newest events (not yet "
                              "in segments) may be missing");
        }
        continue;
      }
      auto view = find_peer_(NodeId(owner));
      if (!view || !view->serving() || stalled_.count(owner) != 0) {
        warnings_.push_back("partitions " + JoinIds(ids) + ": owner node " + std::to_string(owner) +
                            " is down; their newest events (not yet in segments) are missing "
                            "until another node takes them over");
        continue;
      }
      InternalQuery q = base_;
      q.partitions = parts;
      calls.push_back(BufferCall{parts, Start(PeerCallKind::kBuffers, owner, view->address, q)});
    }
    return calls;
  }

  // One owner's answer: its events, or (it failed) its partitions for their new owners in
  // `next_round` or a warning. Fails the query on a peer's limit.
  Status TakeBuffers(BufferCall& bc, int round, PartitionOwners* now_owners,
                     std::map<int64_t, std::vector<std::pair<PartitionId, Epoch>>>* next_round) {
    const int64_t owner = bc.call.node();
    auto r = bc.call.Take(control_);
    auto set = PeerMatches(r);
    if (!set.ok() && IsLimit(set.status())) {
      return Fail(set.status().WithContext("node " + std::to_string(owner)));
    }
    if (!set.ok()) {
      if (!r.ok()) NoteStalled(bc.call, r.status());
      // Partitions taken over since Global was read are asked of their new owner.
      if (now_owners->empty()) *now_owners = OwnersNow();
      std::vector<int64_t> missing, moved;
      for (const auto& [p, e] : bc.partitions) {
        auto it = now_owners->find(p.value);
        if (round + 1 < kOwnerRounds && it != now_owners->end() && it->second.second > e &&
            stalled_.count(it->second.first) == 0) {
          (*next_round)[it->second.first].emplace_back(p, it->second.second);
          moved.push_back(p.value);
        } else {
          missing.push_back(p.value);
        }
      }
      if (!moved.empty()) {
        spdlog::info(
            "query on {}: asking the new owners of partitions {} (owner node {} did not "
            "answer)",
            repo_, JoinIds(moved), owner);
      }
      if (!missing.empty()) {
        warnings_.push_back("partitions " + JoinIds(missing) + ": owner node " +
                            std::to_string(owner) + " did not answer (" + set.status().ToString() +
                            "); their newest events (not yet in segments) are missing");
      }
      return Status::OK();
    }
    for (auto& src : set->sources) buffered_.push_back(std::move(src));
    for (auto& w : set->warnings) warnings_.push_back(std::move(w));
    const std::vector<int64_t> applied = SplitIds(HeaderOf(*r, kGlobalAppliedHeader));
    if (!applied.empty()) need_applied_ = std::max(need_applied_, applied.front());
    const std::string missing = HeaderOf(*r, kMissingPartitionsHeader);
    if (!missing.empty()) {
      warnings_.push_back("partitions " + missing + ": owner node " + std::to_string(owner) +
                          " is still claiming them; their newest events (not yet in segments) "
                          "may be missing");
    }
    return Status::OK();
  }

  // ---- 2. Global at least as new as every owner's snapshot ----
  void WaitForOwnersGlobal() {
    if (need_applied_ > global_->Applied().value &&
        !global_->WaitApplied(Offset(need_applied_), options_.global_wait)) {
      warnings_.push_back("this node's metadata lags the partition owners' (applied " +
                          std::to_string(global_->Applied().value) + " < " +
                          std::to_string(need_applied_) +
                          "); events flushed in the last moments may be missing");
    }
  }

  struct SegmentCall {
    std::vector<SegmentRecord> segments;
    Call call;
  };

  // Steps 3-6 once: plan the segments from one Global state, start the holders' partial calls,
  // compute this node's partial state, take the holders'. `retry`: copies failed, run again.
  Status RunAttempt(int attempt, bool* retry) {
    attempt_warnings_.clear();
    partials_.clear();
    SegmentPlan plan;
    std::map<std::pair<std::string, int32_t>, Position> flushed;
    global_->Read([&](const GlobalState& st) {
      plan = PlanSegments(st, repo_, range_, plan_ctx_);
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
    std::vector<SegmentCall> calls;
    for (auto& [holder, segs] : plan.remote) {
      auto view = find_peer_(NodeId(holder));
      InternalQuery q = base_;
      for (const auto& seg : segs) {
        q.segments.push_back(seg.id);
        q.segment_files.push_back(seg.file_name);
      }
      calls.push_back(SegmentCall{std::move(segs), Start(PeerCallKind::kPartial, holder,
                                                         view ? view->address : "", std::move(q))});
    }
    // Segments only the bucket holds (evicted everywhere, or every holder is down) are fetched
    // into this node's cache and read here.
    for (const auto& seg : plan.from_bucket) (void)FromBucket(seg, &input);
    // Local files stay on disk while this query reads them (a merge or retention may remove them
    // from Global meanwhile).
    pins_.push_back(local_->Pin(local_files));
    if (!plan.unreachable.empty()) WarnUnreachable(plan.unreachable);

    // ---- 4. the cut: buffered events above flushed_through only ----
    Cut(flushed, &input);

    // ---- 5. this node's partial state ----
    auto local = query::ExecutePartial(env_, compiled_, range_, input, exec_);
    if (!local.ok()) return Fail(local.status());
    NoteLocal(*local, retry);
    partials_.push_back(std::move(*local));

    // ---- 6. the peers' partial states ----
    query::ScanInput fallback;  // segments of failed holders, read from the bucket here
    std::vector<Call*> waiting;
    for (auto& sc : calls) waiting.push_back(&sc.call);
    if (Status st = WaitFor(waiting); !st.ok()) return Fail(st);
    for (auto& sc : calls) RETURN_IF_ERROR(TakePartial(sc, attempt, retry, &fallback));
    if (!fallback.segments.empty()) {
      auto more = query::ExecutePartial(env_, compiled_, range_, fallback, exec_);
      if (!more.ok()) return Fail(more.status());
      NoteLocal(*more, retry);
      partials_.push_back(std::move(*more));
    }
    return Status::OK();
  }

  // Fetches `seg` from the bucket into this node's cache and adds it to `into`; false (with a
  // warning) when that failed.
  bool FromBucket(const SegmentRecord& seg, query::ScanInput* into) {
    // Pinned before the fetch: the cache eviction cannot delete it before this query read it.
    pins_.push_back(local_->Pin({seg.file_name}));
    via_bucket_.insert(seg.id.value);
    auto got = local_->FetchFromBucket(seg);
    if (!got.ok()) {
      attempt_warnings_.push_back(
          DescribeSegments({seg}) +
          " could not be fetched from the bucket: " + got.status().ToString());
      return false;
    }
    if (got->fetched) {
      ++out_.bucket_fetches;
      out_.bucket_fetched_bytes += got->bytes;
    }
    into->segments.push_back(local_->SourceOf(seg));
    return true;
  }

  void WarnUnreachable(const std::vector<SegmentRecord>& unreachable) {
    std::set<int64_t> holders;
    for (const auto& seg : unreachable) {
      for (NodeId n : seg.replicas) holders.insert(n.value);
    }
    std::vector<int64_t> silent;
    for (int64_t n : holders) {
      if (stalled_.count(n) != 0) silent.push_back(n);
    }
    attempt_warnings_.push_back(
        DescribeSegments(unreachable) +
        " could not be searched: no live node holds a readable copy (holders: " +
        JoinIds(std::vector<int64_t>(holders.begin(), holders.end())) +
        (silent.empty() ? "" : "; did not answer: " + JoinIds(silent)) + ")");
  }

  // Adds the buffered events above their datasource's flushed_through to `input`.
  void Cut(const std::map<std::pair<std::string, int32_t>, Position>& flushed,
           query::ScanInput* input) const {
    for (const auto& b : buffered_) {
      if (b.datasource.repo != repo_ || b.events == nullptr) continue;
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
      input->buffered.push_back(query::BufferedSource{b.datasource, b.partition, events});
    }
  }

  // A corrupt or missing local copy: withdrawn (and fetched again from a good one); the query is
  // run again on another copy.
  void NoteLocal(const query::PartialResult& p, bool* retry) {
    for (SegmentId id : p.unreadable_segments) {
      local_->ReportUnreadable(id);
      excluded_.insert({id.value, self_.value});
      *retry = true;
    }
  }

  // One holder's answer: its partial state, or (it failed) its copies excluded for the next
  // attempt, or in the last attempt its uploaded segments read from the bucket (`fallback`).
  Status TakePartial(SegmentCall& sc, int attempt, bool* retry, query::ScanInput* fallback) {
    const int64_t holder = sc.call.node();
    auto reply = sc.call.Take(control_);
    auto part = PeerPartial(reply);
    if (!part.ok() && IsLimit(part.status())) {
      return Fail(part.status().WithContext("node " + std::to_string(holder)));
    }
    if (!part.ok() && !reply.ok()) NoteStalled(sc.call, reply.status());
    if (!part.ok() && attempt < kMaxAttempts) {
      // The next attempt reads other copies of its segments (another live holder, this node's,
      // the bucket), as for unreadable copies; nothing of this attempt is kept, so no segment is
      // counted twice.
      for (const auto& seg : sc.segments) excluded_.insert({seg.id.value, holder});
      *retry = true;
      return Status::OK();
    }
    if (!part.ok()) {
      std::vector<SegmentRecord> failed;
      for (const auto& seg : sc.segments) {
        if (!seg.uploaded || !plan_ctx_.has_bucket || !FromBucket(seg, fallback)) {
          failed.push_back(seg);
        }
      }
      if (!failed.empty()) {
        attempt_warnings_.push_back(DescribeSegments(failed) + " on node " +
                                    std::to_string(holder) +
                                    " could not be searched: " + part.status().ToString());
      }
      return Status::OK();
    }
    for (int64_t id : SplitIds(HeaderOf(*reply, kUnreadableSegmentsHeader))) {
      excluded_.insert({id, holder});
      *retry = true;
    }
    // Copies the holder no longer has (its Global is ahead of this node's): read elsewhere in
    // the next attempt; in the last one the holder's warning names them.
    for (int64_t id : SplitIds(HeaderOf(*reply, kSegmentsNotHeldHeader))) {
      excluded_.insert({id, holder});
      *retry = true;
    }
    for (auto& w : part->warnings) w = "node " + std::to_string(holder) + ": " + w;
    partials_.push_back(std::move(*part));
    return Status::OK();
  }

  PartitionOwners OwnersNow() const {
    PartitionOwners owners;
    global_->Read([&](const GlobalState& st) { owners = OwnersOf(st); });
    return owners;
  }

  Call Start(PeerCallKind kind, int64_t peer, const std::string& address, InternalQuery q) {
    q.timeout_ms = RemainingMs(control_);
    contacted_.insert(address);
    if (control_.peers_total) ++*control_.peers_total;
    PeerCallOptions options;
    options.timeout = kUnlimitedPeerTimeout;
    // The peer stops at the deadline itself; this only bounds a peer that hangs.
    if (control_.deadline) options.timeout = std::chrono::milliseconds(q.timeout_ms + 5000);
    options.progress_timeout = options_.peer_progress_timeout;
    auto slot = std::make_shared<PeerSlot>(waiter_);
    peers_->Start(kind, NodeId(peer), address, q, options, slot);
    return Call(peer, address, std::move(slot));
  }

  Status WaitFor(const std::vector<Call*>& calls) {
    return WaitForCalls(
        *waiter_, calls, control_,
        [this](int64_t peer) {
          auto view = find_peer_(NodeId(peer));
          return !view || !view->alive;
        },
        options_.heartbeat_timeout_ms);
  }

  // The query fails with `st`: every peer asked is told to cancel its part.
  Status Fail(Status st) {
    if (!contacted_.empty()) peers_->Cancel(base_.query_id, contacted_);
    return st;
  }

  // A node that did not answer a call (no progress within the progress timeout, declared dead,
  // connection failed): asked nothing more, its segments read from other copies, a cancel at the
  // end.
  void NoteStalled(const Call& call, const Status& why) {
    if (stalled_.insert(call.node()).second) {
      spdlog::warn(
          "query on {}: node {} did not answer ({}); reading what it was asked for "
          "elsewhere",
          repo_, call.node(), why.ToString());
    }
    stalled_addresses_.insert(call.address());
  }

  Env* const env_;
  Clock* const clock_;
  Global* const global_;
  LocalNode* const local_;
  PeerClient* const peers_;
  const std::function<std::optional<PeerInfo>(NodeId)>& find_peer_;
  const CoordinatorOptions& options_;
  const std::string& repo_;
  const query::CompiledQuery& compiled_;
  const query::TimeRange& range_;
  const QueryControl& control_;
  const NodeId self_;
  const std::shared_ptr<PeerWaiter> waiter_;
  query::ExecOptions exec_;
  InternalQuery base_;
  PlanContext plan_ctx_;

  std::vector<std::string> warnings_;
  std::set<std::string> contacted_;  // peers asked for anything
  std::set<int64_t> stalled_;
  std::set<std::string> stalled_addresses_;
  std::vector<query::BufferedSource> buffered_;
  int64_t need_applied_ = -1;
  // Copies not to read in a later attempt, (segment, holder): found unreadable, or held by a node
  // that did not answer.
  std::set<std::pair<int64_t, int64_t>> excluded_;
  // Segments this query already read through the bucket (fetched into this node's cache). A copy
  // of this node found unreadable excludes the bucket route only when it came from there: a
  // damaged local copy is withdrawn and deleted (ReportUnreadable), so a bucket fetch installs a
  // good one.
  std::set<int64_t> via_bucket_;
  std::vector<std::shared_ptr<void>> pins_;  // files read by this query
  std::vector<std::string> attempt_warnings_;
  std::vector<query::PartialResult> partials_;
  CoordinatedResult out_;
};

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
  if (query::QueryTables(compiled).empty() || query::TablesBound(compiled)) {
    QueryRun run(env_, clock_, global_, local_, peers_, find_peer_, options_, repo, query_string,
                 compiled, range, control, query::BoundTables{});
    return run.Run();
  }
  // defineTable()/join(): each subquery runs first, as a whole query of its own over the
  // repository (earlier tables bound into later ones); its rows become a table; then the query
  // is compiled again with the tables, and they go with it to every node.
  const GlobalLookupFiles files(global_, repo, options_.geo);
  query::BoundTables tables;
  std::vector<std::string> warnings;
  uint64_t fetches = 0, fetched_bytes = 0;
  for (const query::TableQuery& t : query::QueryTables(compiled)) {
    auto sub = query::Compile(t.query, &files, &tables);
    if (!sub.ok()) {
      return Status::InvalidArgument(t.function + "() subquery at position " +
                                     std::to_string(t.position) + ": " + sub.status().message());
    }
    ASSIGN_OR_RETURN(query::TimeRange sub_range, query::TableRange(t, range));
    QueryRun run(env_, clock_, global_, local_, peers_, find_peer_, options_, repo, t.query, **sub,
                 sub_range, control, tables);
    ASSIGN_OR_RETURN(CoordinatedResult got, run.Run());
    // An event result is cut at the event cap (the newest): reaching it counts as too many.
    const size_t event_cap = query::ExecOptions{}.max_events;
    if (got.result.rows.size() > static_cast<size_t>(t.limit) ||
        (!got.result.is_aggregate && got.result.rows.size() >= event_cap)) {
      return Status::InvalidArgument(t.function + "() at position " + std::to_string(t.position) +
                                     ": its subquery gives more than " + std::to_string(t.limit) +
                                     " rows (the most a table holds" +
                                     (t.function == "join" ? std::string(", limit=") : "") +
                                     "); narrow the subquery");
    }
    for (std::string& w : got.warnings) warnings.push_back(t.function + "(): " + std::move(w));
    fetches += got.bucket_fetches;
    fetched_bytes += got.bucket_fetched_bytes;
    tables[t.name] = query::TableFromRows(t, got.result.rows);
  }
  auto bound = query::Compile(query_string, &files, &tables);
  if (!bound.ok()) return bound.status();
  QueryRun run(env_, clock_, global_, local_, peers_, find_peer_, options_, repo, query_string,
               **bound, range, control, tables);
  ASSIGN_OR_RETURN(CoordinatedResult out, run.Run());
  warnings.insert(warnings.end(), std::make_move_iterator(out.warnings.begin()),
                  std::make_move_iterator(out.warnings.end()));
  out.warnings = std::move(warnings);
  out.bucket_fetches += fetches;
  out.bucket_fetched_bytes += fetched_bytes;
  return out;
}

}  // namespace sediment::coordinator
