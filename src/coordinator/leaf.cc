#include "coordinator/leaf.h"

#include <chrono>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/json_writer.h"
#include "coordinator/lookup_files.h"
#include "http/status_code.h"
#include "query/wire.h"

namespace sediment::coordinator {
namespace {

// ExecOptions of a query that runs for a coordinator: the time it has left and the memory bound.
query::ExecOptions ExecOptionsFor(const InternalQuery& q, int threads,
                                  const std::atomic<bool>* cancel) {
  query::ExecOptions exec;
  exec.threads = threads;
  exec.cancel = cancel;
  exec.max_memory_bytes = static_cast<size_t>(q.max_memory_bytes);
  if (q.timeout_ms > 0) {
    exec.deadline = SteadyNow() + std::chrono::milliseconds(q.timeout_ms);
  }
  return exec;
}

// The internal query in `req`'s body and its compiled form; the 400 answer when either is bad.
std::optional<http::Response> Parse(const http::Request& req, const Global* global,
                                    const std::shared_ptr<const query::GeoDatabases>& geo,
                                    InternalQuery* q,
                                    std::shared_ptr<const query::CompiledQuery>* compiled) {
  auto decoded = DecodeInternalQuery(req.body);
  if (!decoded.ok()) return http::JsonError(400, decoded.status().message());
  const GlobalLookupFiles files(global, decoded->repo, geo);
  // With the coordinator's defineTable()/join() results (none for most queries).
  auto c = query::Compile(decoded->query_string, &files, &decoded->tables);
  if (!c.ok()) return http::JsonError(400, c.status().message());
  *q = std::move(*decoded);
  *compiled = std::move(*c);
  return std::nullopt;
}

http::Response Binary(std::string body) {
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(body);
  return r;
}

// The warning of an answer that lacks segments `not_here` it was asked for.
std::string NotHeldWarning(const std::vector<int64_t>& not_here, NodeId node) {
  return "segments " + JoinIds(not_here) + " are not held by node " + std::to_string(node.value) +
         " (removed or unknown)";
}

// Names the segments asked for but not held here (Global no longer lists this copy: withdrawn as
// corrupt, dropped as an extra copy, merged away), so the coordinator reads another copy instead
// of answering without them.
void NameNotHeld(const std::vector<int64_t>& not_here, http::Response* r) {
  if (not_here.empty()) return;
  r->headers.emplace_back(std::string(kSegmentsNotHeldHeader), JoinIds(not_here, SIZE_MAX));
}

// Reports segments a query could not read to `local` (withdrawn) and names them in `r`.
void NameUnreadable(const std::vector<SegmentId>& ids, LocalNode* local, http::Response* r) {
  if (ids.empty()) return;
  std::vector<int64_t> unreadable;
  for (SegmentId id : ids) {
    unreadable.push_back(id.value);
    local->ReportUnreadable(id);
  }
  r->headers.emplace_back(std::string(kUnreadableSegmentsHeader), JoinIds(unreadable, SIZE_MAX));
}

}  // namespace

// Registers a request's cancel flag under its query id while it runs (no id: not cancellable).
class Leaf::Running {
 public:
  Running(Leaf* leaf, const std::string& id)
      : leaf_(leaf), flag_(std::make_shared<std::atomic<bool>>(false)) {
    if (id.empty()) return;
    std::lock_guard lock(leaf_->mu_);
    it_ = leaf_->running_.emplace(id, flag_);
    registered_ = true;
  }
  ~Running() {
    if (!registered_) return;
    std::lock_guard lock(leaf_->mu_);
    leaf_->running_.erase(it_);
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
  const std::atomic<bool>* flag() const { return flag_.get(); }

 private:
  Leaf* const leaf_;
  std::shared_ptr<std::atomic<bool>> flag_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>>::iterator it_;
  bool registered_ = false;
};

// The asked segments this node can read, their files pinned while this lives.
struct Leaf::Held {
  query::ScanInput input;
  std::vector<int64_t> not_here;  // asked for, but not held by this node
  std::shared_ptr<void> pin;
};

Leaf::Leaf(Env* env, Global* global, LocalNode* local, int query_threads,
           std::shared_ptr<const query::GeoDatabases> geo)
    : env_(env),
      global_(global),
      local_(local),
      query_threads_(query_threads),
      geo_(std::move(geo)) {}

Leaf::Held Leaf::HoldSegments(const InternalQuery& q) {
  Held held;
  std::vector<std::string> files;
  const NodeId self = local_->id();
  global_->Read([&](const GlobalState& st) {
    for (size_t i = 0; i < q.segments.size(); ++i) {
      const SegmentId id = q.segments[i];
      auto it = st.segments.find(id);
      if (it != st.segments.end() && it->second.replicas.count(self) != 0) {
        held.input.segments.push_back(local_->SourceOf(it->second));
        files.push_back(it->second.file_name);
        continue;
      }
      // Removed from Global after the coordinator read it (a merge swapped it out, retention):
      // the file stays for the deletion delay and is still read.
      const std::string& file = q.segment_files[i];
      if (it == st.segments.end()) {
        if (auto src = local_->SourceOfFile(file, id)) {
          held.input.segments.push_back(std::move(*src));
          files.push_back(file);
          continue;
        }
      }
      held.not_here.push_back(id.value);
    }
  });
  held.pin = local_->Pin(files);
  return held;
}

http::Response Leaf::Buffers(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = Parse(req, global_, geo_, &q, &compiled)) return *err;
  Running running(this, q.query_id);
  std::map<int32_t, Epoch> want;
  for (const auto& [p, e] : q.partitions) want[p.value] = e;
  std::vector<int64_t> missing;
  query::ScanInput input;
  for (auto& b : local_->Buffers(want, &missing)) {
    if (b.datasource.repo == q.repo) input.buffered.push_back(std::move(b));
  }
  // Read after the snapshot: the coordinator's Global must reach at least this far.
  const Offset applied = global_->Applied();
  auto set = query::CollectMatches(env_, *compiled, q.range, input,
                                   ExecOptionsFor(q, query_threads_, running.flag()));
  if (!set.ok()) return http::JsonErrorFor(set.status());
  http::Response r = Binary(query::EncodeMatchSet(*set));
  r.headers.emplace_back(std::string(kGlobalAppliedHeader), std::to_string(applied.value));
  if (!missing.empty()) {
    r.headers.emplace_back(std::string(kMissingPartitionsHeader), JoinIds(missing));
  }
  return r;
}

http::Response Leaf::Segments(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = Parse(req, global_, geo_, &q, &compiled)) return *err;
  Running running(this, q.query_id);
  Held held = HoldSegments(q);
  auto set = query::CollectMatches(env_, *compiled, q.range, held.input,
                                   ExecOptionsFor(q, query_threads_, running.flag()), q.max_events);
  if (!set.ok()) return http::JsonErrorFor(set.status());
  if (!held.not_here.empty()) set->warnings.push_back(NotHeldWarning(held.not_here, local_->id()));
  http::Response r = Binary(query::EncodeMatchSet(*set));
  NameUnreadable(set->unreadable_segments, local_, &r);
  NameNotHeld(held.not_here, &r);
  return r;
}

http::Response Leaf::Partial(const http::Request& req) {
  InternalQuery q;
  std::shared_ptr<const query::CompiledQuery> compiled;
  if (auto err = Parse(req, global_, geo_, &q, &compiled)) return *err;
  Running running(this, q.query_id);
  Held held = HoldSegments(q);
  auto partial = query::ExecutePartial(env_, *compiled, q.range, held.input,
                                       ExecOptionsFor(q, query_threads_, running.flag()));
  if (!partial.ok()) return http::JsonErrorFor(partial.status());
  if (!held.not_here.empty()) {
    partial->warnings.push_back(NotHeldWarning(held.not_here, local_->id()));
  }
  http::Response r = Binary(query::EncodePartial(*partial));
  NameUnreadable(partial->unreadable_segments, local_, &r);
  NameNotHeld(held.not_here, &r);
  return r;
}

http::Response Leaf::Cancel(const http::Request& req) {
  auto id = DecodeCancel(req.body);
  if (!id.ok()) return http::JsonError(400, id.status().message());
  int cancelled = 0;
  {
    std::lock_guard lock(mu_);
    auto [lo, hi] = running_.equal_range(*id);
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

}  // namespace sediment::coordinator
