// Query execution: pruning, parallel block scans with batch filter evaluation, per-worker
// partial results, merge and the row pipeline.
#include <re2/re2.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "common/time_parse.h"
#include "query/aggregate.h"
#include "query/columns.h"
#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"
#include "query/regex_count.h"
#include "query/transform.h"
#include "segment/segment.h"

namespace sediment::query {
namespace {

using K = FilterNode::Kind;
using Mask = std::vector<uint8_t>;

// Events per task when scanning buffered (not yet flushed) events.
constexpr size_t kBufferedChunk = 4096;

// One decoded block under evaluation, with where its raw strings lie. Thread-compatible: one
// per scan worker (the layout is worked out on first use, by a const caller).
struct BlockView {
  const DecodedBlock* b = nullptr;
  const Datasource* ds = nullptr;
  PartitionId partition;
  size_t n = 0;

  void Init(const DecodedBlock* block, const Datasource* d, PartitionId p) {
    b = block;
    ds = d;
    partition = p;
    n = block->size();
    layout_known_ = false;
  }

  // Where the raw strings lie (worked out on the first call after Init: only text searches need
  // it). contiguous: the non-empty raw strings lie in ascending, non-overlapping order in memory,
  // so a search can run over [base, run_end) and map hits back through `starts`.
  struct Layout {
    bool contiguous = false;
    const char* base = nullptr;
    const char* run_end = nullptr;
    std::vector<size_t> starts;  // offset of raw[i] from base (monotone when contiguous)
  };
  const Layout& layout() const {
    if (!layout_known_) {
      FindLayout();
      layout_known_ = true;
    }
    return layout_;
  }

 private:
  void FindLayout() const {
    Layout& l = layout_;
    l.contiguous = false;
    l.base = nullptr;
    if (b->raw_omitted) {
      // A partial read without raw strings (format 2): nothing to search.
      l.starts.clear();
      return;
    }
    l.starts.assign(n, 0);
    uintptr_t prev_end = 0;
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view r = b->raw[i];
      if (r.empty()) continue;
      uintptr_t d0 = reinterpret_cast<uintptr_t>(r.data());
      if (l.base == nullptr) {
        l.base = r.data();
      } else if (d0 < prev_end) {
        ok = false;
        break;
      }
      prev_end = d0 + r.size();
    }
    if (!ok || l.base == nullptr) return;
    l.contiguous = true;
    const uintptr_t b0 = reinterpret_cast<uintptr_t>(l.base);
    size_t last_end = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view r = b->raw[i];
      if (r.empty()) {
        l.starts[i] = last_end;
      } else {
        l.starts[i] = reinterpret_cast<uintptr_t>(r.data()) - b0;
        last_end = l.starts[i] + r.size();
      }
    }
    l.run_end = l.base + last_end;
  }

  mutable bool layout_known_ = false;
  mutable Layout layout_;
};

size_t NextCandidate(const Mask& m, size_t from) {
  while (from < m.size() && m[from] == 0) ++from;
  return from;
}

void EvalText(const CiSearcher& s, const BlockView& v, const Mask& cand, Mask* out) {
  const size_t len = s.size();
  size_t count = 0;
  for (uint8_t c : cand) count += c;
  if (count == 0) return;
  if (len == 0) {
    *out = cand;
    return;
  }
  const DecodedBlock& b = *v.b;
  const BlockView::Layout* l = count * 8 < v.n ? nullptr : &v.layout();
  if (l == nullptr || !l->contiguous) {
    for (size_t i = 0; i < v.n; ++i) {
      if (cand[i] && s.Contains(b.raw[i])) (*out)[i] = 1;
    }
    return;
  }
  size_t i = NextCandidate(cand, 0);
  while (i < v.n) {
    const char* p = s.Find(l->base + l->starts[i], l->run_end);
    if (p == nullptr) break;
    const size_t off = static_cast<size_t>(p - l->base);
    // Last event starting at or before the hit (never before i).
    size_t j = static_cast<size_t>(std::upper_bound(l->starts.begin() + static_cast<ptrdiff_t>(i),
                                                    l->starts.end(), off) -
                                   l->starts.begin()) -
               1;
    if (cand[j] && off + len <= l->starts[j] + b.raw[j].size()) (*out)[j] = 1;
    // A hit crossing event j's end rules out any later start inside j as well.
    i = NextCandidate(cand, j + 1);
  }
}

// A field comparison over a dictionary column: each distinct value is matched once (as a record
// holding only that field, so the rules are Matches' own), events take their value's verdict; an
// event without the field matches no comparison.
void EvalDictLeaf(const FilterNode& node, const DecodedBlock::DictColumn& d, const Mask& cand,
                  Mask* out) {
  auto decide = [&node, &d](uint32_t id) {
    Row row;
    row.emplace_back(node.field, Value(std::string(d.values[id])));
    return Matches(node, Record::FromRow(std::move(row), RecordKey{})) ? 1 : 0;
  };
  if (d.values.size() * 8 <= cand.size()) {
    // Few distinct values: decide each once up front, then one branch-free pass (a table
    // lookup per event; an event without the field looks up the extra last entry, false).
    std::vector<uint8_t> verdict(d.values.size() + 1, 0);
    for (uint32_t id = 0; id < d.values.size(); ++id)
      verdict[id] = static_cast<uint8_t>(decide(id));
    const uint32_t none = static_cast<uint32_t>(d.values.size());
    const uint8_t* c = cand.data();
    const uint32_t* ids = d.ids.data();
    uint8_t* o = out->data();
    for (size_t i = 0; i < cand.size(); ++i) {
      const uint32_t id = ids[i] == DecodedBlock::kNoValue ? none : ids[i];
      o[i] = c[i] & verdict[id];
    }
    return;
  }
  std::vector<int8_t> verdict(d.values.size(), -1);
  for (size_t i = 0; i < cand.size(); ++i) {
    if (!cand[i]) continue;
    const uint32_t id = d.ids[i];
    if (id == DecodedBlock::kNoValue) continue;
    if (verdict[id] < 0) verdict[id] = static_cast<int8_t>(decide(id));
    (*out)[i] = static_cast<uint8_t>(verdict[id]);
  }
}

// Whether the first kSample candidates of the block (when there are that many) all contain one
// of `literals`: then searching for them would hardly narrow the candidates, and a search that
// may be skipped (a regex prefilter, an implied literal) is skipped.
bool CommonInBlock(const std::vector<const CiSearcher*>& literals, const BlockView& v,
                   const Mask& cand) {
  constexpr size_t kSample = 16;
  size_t seen = 0;
  for (size_t i = 0; i < v.n && seen < kSample; ++i) {
    if (!cand[i]) continue;
    const std::string_view raw = v.b->raw[i];
    if (std::none_of(literals.begin(), literals.end(),
                     [&](const CiSearcher* s) { return s->Contains(raw); })) {
      return false;
    }
    ++seen;
  }
  return seen == kSample;
}

// /re/ over a block: with a prefilter, the candidates holding one of its literals are found over
// the block's raw bytes at once (as free text), and RE2 runs on those only.
void EvalRawRegex(const FilterNode& node, const BlockView& v, const Mask& cand, Mask* out) {
  const Mask* check = &cand;
  Mask hits;
  std::vector<const CiSearcher*> literals;
  for (const CiSearcher& s : node.regex_prefilter) literals.push_back(&s);
  if (!literals.empty() && !CommonInBlock(literals, v, cand)) {
    hits.assign(v.n, 0);
    for (const CiSearcher& s : node.regex_prefilter) EvalText(s, v, cand, &hits);
    check = &hits;
  }
  const RE2& re = ThreadLocalRegex(node.re);
  const DecodedBlock& b = *v.b;
  for (size_t i = 0; i < v.n; ++i) {
    if ((*check)[i] && RE2::PartialMatch(re2::StringPiece(b.raw[i].data(), b.raw[i].size()), re)) {
      (*out)[i] = 1;
    }
  }
}

void Eval(const FilterNode& node, const BlockView& v, const Mask& cand, Mask* out) {
  out->assign(v.n, 0);
  const DecodedBlock& b = *v.b;
  std::string scratch;
  switch (node.kind) {
    case K::kTrue:
      *out = cand;
      return;
    case K::kFalse:
      return;
    case K::kAnd: {
      Mask left;
      Eval(*node.children[0], v, cand, &left);
      if (std::find(left.begin(), left.end(), 1) == left.end()) return;
      Eval(*node.children[1], v, left, out);
      return;
    }
    case K::kOr: {
      Mask left, rest(v.n), right;
      Eval(*node.children[0], v, cand, &left);
      for (size_t i = 0; i < v.n; ++i) rest[i] = cand[i] & static_cast<uint8_t>(!left[i]);
      Eval(*node.children[1], v, rest, &right);
      for (size_t i = 0; i < v.n; ++i) (*out)[i] = left[i] | right[i];
      return;
    }
    case K::kNot: {
      Mask inner;
      Eval(*node.children[0], v, cand, &inner);
      for (size_t i = 0; i < v.n; ++i) (*out)[i] = cand[i] & static_cast<uint8_t>(!inner[i]);
      return;
    }
    case K::kText:
      if (node.implied && CommonInBlock({node.searcher.get()}, v, cand)) {
        *out = cand;
        return;
      }
      EvalText(*node.searcher, v, cand, out);
      return;
    case K::kTextGlob:
      for (size_t i = 0; i < v.n; ++i) {
        if (cand[i] && GlobPiecesInOrder(node.pieces, b.raw[i])) (*out)[i] = 1;
      }
      return;
    case K::kRawRegex:
      EvalRawRegex(node, v, cand, out);
      return;
    case K::kFieldEq:
    case K::kFieldGlob:
    case K::kFieldRegex:
    case K::kFieldCmp:
      if (const DecodedBlock::DictColumn* d = b.FindDictColumn(node.field)) {
        EvalDictLeaf(node, *d, cand, out);
        return;
      }
      // A field no event of the block has: no comparison matches.
      if (b.field_names_complete && IsEventField(node.field) && !b.HasFieldName(node.field)) {
        return;
      }
      // One record at a time, with the same rules as a filter stage later in the pipeline.
      for (size_t i = 0; i < v.n; ++i) {
        if (cand[i] && Matches(node, Record(EventRef{v.b, v.ds, v.partition, i}))) (*out)[i] = 1;
      }
      return;
  }
}

// ---- the pipeline around the scan ----

// FailedPrecondition when the query's defineTable()/join() tables are not bound (a coordinator
// runs their subqueries first and compiles the query again with their results), or when it
// calls start()/end() (see CompiledQuery::uses_time_range).
Status CheckTablesBound(const CompiledQuery& q) {
  if (q.uses_time_range) {
    return Status::FailedPrecondition(
        "start()/end() need the query's time range bound into the query text (BindTimeRange); "
        "the query cannot run as compiled");
  }
  if (q.tables.empty() || q.tables_bound) return Status::OK();
  return Status::FailedPrecondition(q.tables[0].function +
                                    "(): its subquery must run first (the query's coordinator "
                                    "runs it); the query cannot run here");
}

// Where the query's stages split: [0, collect) are per-record stages run where the data is read,
// `collect` is the first collecting stage (stages.size() when there is none: the implicit event
// collector), and the stages after it run on the coordinator over the collector's rows.
size_t CollectIndex(const CompiledQuery& q) {
  for (size_t s = 0; s < q.stages.size(); ++s) {
    if (!q.stages[s].IsTransform()) return s;
  }
  return q.stages.size();
}

std::unique_ptr<Collector> MakeCollector(const CompiledQuery& q, size_t collect,
                                         const CollectorContext& ctx) {
  if (collect < q.stages.size()) return NewCollector(q.stages[collect], ctx);
  return NewEventCollector(ctx);
}

// Runs per-record stages [begin, end) over one record and hands the survivors to `sink`. Stages
// that give at most one record change `r` in place; at the first that may give more (case,
// split) its outputs go to the stage's vector in `scratch` (one reusable vector per stage) and
// each runs through the rest. `r` is left unspecified.
template <typename Sink>
void RunTransforms(const std::vector<Stage>& stages, size_t begin, size_t end, Record& r,
                   std::vector<std::vector<Record>>* scratch, Sink&& sink) {
  for (size_t s = begin; s < end; ++s) {
    if (EmitsOneOrNone(stages[s])) {
      if (!ApplyTransformInPlace(stages[s], r)) return;
      continue;
    }
    std::vector<Record>& out = (*scratch)[s];
    const size_t mark = out.size();
    ApplyTransform(stages[s], std::move(r), &out);
    // Stages may recurse into the same vector only at deeper levels; process what this call
    // added.
    for (size_t k = mark; k < out.size(); ++k) {
      RunTransforms(stages, s + 1, end, out[k], scratch, sink);
    }
    out.resize(mark);
    return;
  }
  sink(r);
}

// Copies buffered events [begin, end) that fall in `range` into a DecodedBlock.
void BuildBufferedBlock(const std::vector<PositionedEvent>& events, size_t begin, size_t end,
                        const TimeRange& range, DecodedBlock* out) {
  size_t bytes = 0;
  for (size_t i = begin; i < end; ++i) {
    const Event& e = events[i].event;
    if (e.timestamp_ms < range.start_ms || e.timestamp_ms >= range.end_ms) continue;
    bytes += e.raw.size();
    for (const Field& f : e.fields) bytes += f.name.size() + f.value.size();
  }
  out->timestamps.clear();
  out->ingest_ts.clear();
  out->positions.clear();
  out->raw.clear();
  out->fields.clear();
  out->field_names.clear();
  out->field_names_complete = false;
  out->dict_columns.clear();
  out->raw_omitted = false;
  out->buffer.clear();
  out->buffer.reserve(bytes);  // views below stay valid: appends never exceed this capacity
  out->field_begin.assign(1, 0);
  auto append = [out](std::string_view s) {
    const size_t at = out->buffer.size();
    out->buffer.append(s);
    return std::string_view(out->buffer.data() + at, s.size());
  };
  for (size_t i = begin; i < end; ++i) {
    const PositionedEvent& pe = events[i];
    const Event& e = pe.event;
    if (e.timestamp_ms < range.start_ms || e.timestamp_ms >= range.end_ms) continue;
    out->timestamps.push_back(e.timestamp_ms);
    out->ingest_ts.push_back(e.ingest_ms);
    out->positions.push_back(pe.pos);
    out->raw.push_back(append(e.raw));
    for (const Field& f : e.fields) {
      std::string_view name = append(f.name);
      std::string_view value = append(f.value);
      out->fields.push_back(FieldView{name, value});
    }
    out->field_begin.push_back(static_cast<uint32_t>(out->fields.size()));
  }
  out->event_count = out->timestamps.size();
}

std::string RangeText(int64_t min_ts, int64_t max_ts) {
  return FormatIso8601Millis(min_ts) + " .. " + FormatIso8601Millis(max_ts);
}

// Runs fn(worker, item) for item in [0, count) on up to `threads` threads. Exceptions become a
// Status (the first one wins).
template <typename Fn>
Status ParallelFor(int threads, size_t count, Fn fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first_error;
  auto body = [&](size_t worker) {
    try {
      for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(worker, i);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok())
        first_error = Status::Internal(std::string("query worker: ") + e.what());
      next.store(count);
    }
  };
  size_t n =
      std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), count));
  std::vector<std::thread> pool;
  for (size_t w = 1; w < n; ++w) pool.emplace_back(body, w);
  body(0);
  for (std::thread& t : pool) t.join();
  return first_error;
}

// Event fields that every event passing `f` has: those of field comparisons on its AND-spine
// (an event without the field matches no comparison, see Eval). An OR contributes the fields both
// sides require.
std::vector<std::string> RequiredFields(const FilterNode& f) {
  switch (f.kind) {
    case K::kFieldEq:
    case K::kFieldGlob:
    case K::kFieldRegex:
    case K::kFieldCmp:
      if (f.field.empty() || !IsEventField(f.field)) return {};
      return {f.field};
    case K::kAnd: {
      std::vector<std::string> out = RequiredFields(*f.children[0]);
      for (std::string& s : RequiredFields(*f.children[1])) {
        if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
      }
      return out;
    }
    case K::kOr: {
      std::vector<std::string> out, right = RequiredFields(*f.children[1]);
      for (std::string& s : RequiredFields(*f.children[0])) {
        if (std::find(right.begin(), right.end(), s) != right.end()) out.push_back(std::move(s));
      }
      return out;
    }
    default:
      return {};
  }
}

struct SegmentPlan {
  const SegmentSource* src = nullptr;
  FilterPtr filter;
  std::vector<std::string> terms;
  std::vector<std::string> fields;  // RequiredFields(*filter)
  std::unique_ptr<SegmentReader> reader;
};

struct Task {
  bool buffered = false;
  size_t source = 0;  // SegmentPlan index or buffered index
  size_t block = 0;   // segment block index, or first event of the buffered chunk
  size_t end = 0;     // buffered chunk end
};

struct Warning {
  size_t order_a = 0, order_b = 0;
  std::string text;
};

// Per-thread scratch and partial statistics of a scan.
struct ScanWorker {
  QueryStats stats;
  std::vector<Warning> warnings;
  std::vector<SegmentId> unreadable;
  DecodedBlock block;
  BlockView view;
  Mask cand, matched;
};

// Evaluates `filter` and the time range over the block in w->view into w->matched.
// `raw_bytes`: the block's @rawstring bytes when its index knows them (format 2, whose raw strings
// may not be decoded), else 0 (counted from the decoded raw strings). `inside`: the block's
// index puts every event inside `range`.
void ScanBlock(const FilterNode& filter, const TimeRange& range, uint64_t raw_bytes, bool inside,
               ScanWorker* w) {
  BlockView& v = w->view;
  const DecodedBlock& b = *v.b;
  w->stats.events_scanned += v.n;
  if (raw_bytes != 0) {
    w->stats.bytes_scanned += raw_bytes;
  } else {
    for (size_t i = 0; i < v.n; ++i) w->stats.bytes_scanned += b.raw[i].size();
  }
  if (inside) {
    w->cand.assign(v.n, 1);
  } else {
    w->cand.assign(v.n, 0);
    for (size_t i = 0; i < v.n; ++i) {
      w->cand[i] = b.timestamps[i] >= range.start_ms && b.timestamps[i] < range.end_ms;
    }
  }
  Eval(filter, v, w->cand, &w->matched);
}

// `order`: the block was read with @timestamp and positions (ColumnSelection::order); without,
// they are either absent (empty) or decoded anyway (format 1).
bool ValidBlockShape(const DecodedBlock& b, bool order) {
  const size_t n = b.size();
  const size_t ordered = order || !b.timestamps.empty() ? n : 0;
  if (b.timestamps.size() != ordered || b.positions.size() != ordered || b.ingest_ts.size() != n ||
      b.raw.size() != n || b.field_begin.size() != n + 1) {
    return false;
  }
  bool decreasing = false;  // no early exit: the loop vectorizes
  for (size_t i = 0; i < n; ++i) decreasing |= b.field_begin[i] > b.field_begin[i + 1];
  return !decreasing && b.field_begin[n] <= b.fields.size();
}

// Lets a scan whose collector keeps the newest (direction +1) or oldest (-1) records skip blocks
// that can no longer contribute: segment blocks are scanned newest (oldest) first and, after each
// block, cut(worker) may give a timestamp; blocks wholly older (newer) than the best cut so far
// are skipped. direction 0: no cutting.
struct TimeCutter {
  int direction = 0;
  std::function<std::optional<int64_t>(size_t worker)> cut;
};

struct ScanOutcome {
  QueryStats stats;                   // every counter but events_matched and elapsed_ms
  std::vector<std::string> warnings;  // unreadable segments / blocks, in input order
  std::vector<SegmentId> unreadable;  // segments with an unreadable part, sorted, unique
  bool stopped = false;               // `stop` ended the scan before every task ran
};

// The scan shared by Execute and CollectMatches: prunes segments (time range, datasource tags),
// opens them and prunes blocks (time range, block filters) in parallel, then scans blocks and
// 4096-event chunks of buffered events on max(1, options.threads) threads. Segment blocks are
// decoded with `columns` (at least those; see query/columns.h), with @timestamp and positions
// added for a block not wholly inside `range` (the range check reads them). When `count_block` is
// set, a segment block that lies wholly inside `range` and whose datasource's filter is always
// true is not read: count_block(worker, its event count) is called instead (from phase 1). For
// every scanned block it calls visit(worker, task, view, matched) on a worker thread, where
// matched[i] != 0 for the events of `view` in `range` that pass the filter; `task` numbers the
// scan tasks in input order (segments in order with their blocks in order, then buffered sources
// in order with their chunks in order). When `unread` is set, a segment block wholly inside `range`
// whose datasource's filter is always true and that has no field `unread_field`
// (SegmentReader::BlockMayHaveField; only with options.use_block_filters) is not read either:
// unread(worker, its event count) is called instead (from phase 1): its events pass the filter but
// add nothing to the collector. Calls with the same `worker` never overlap. `stop()` is
// asked (from worker threads) before each task; once it returns true the remaining tasks are
// skipped and `stopped` is set.
template <typename Visit, typename Stop>
Result<ScanOutcome> Scan(Env* env, const CompiledQuery& query, const ColumnSelection& columns,
                         const TimeRange& range, const ScanInput& input, const ExecOptions& options,
                         const std::function<void(size_t, uint64_t)>& count_block,
                         const std::string& unread_field,
                         const std::function<void(size_t, uint64_t)>& unread,
                         const TimeCutter& cutter, Visit&& visit, Stop&& stop) {
  ScanOutcome out;
  const int threads = std::max(1, options.threads);
  QueryStats& stats = out.stats;

  // Segment pruning by time range and datasource tags.
  std::vector<SegmentPlan> plans;
  stats.segments_total = input.segments.size();
  for (const SegmentSource& s : input.segments) {
    if (s.max_ts < range.start_ms || s.min_ts >= range.end_ms) continue;
    FilterPtr f = Specialize(query.filter, s.datasource);
    if (f->kind == K::kFalse) continue;
    SegmentPlan p;
    p.src = &s;
    p.terms = RequiredTerms(*f);
    p.fields = RequiredFields(*f);
    p.filter = std::move(f);
    plans.push_back(std::move(p));
  }

  std::vector<ScanWorker> workers(static_cast<size_t>(threads));
  ColumnSelection ordered_columns = columns;
  ordered_columns.order = true;

  // Phase 1: open segments and prune their blocks.
  std::vector<std::vector<Task>> plan_tasks(plans.size());
  std::vector<uint8_t> opened(plans.size(), 0);
  RETURN_IF_ERROR(ParallelFor(threads, plans.size(), [&](size_t worker, size_t i) {
    SegmentPlan& p = plans[i];
    ScanWorker& w = workers[worker];
    Result<std::unique_ptr<SegmentReader>> r = p.src->opener->Open(p.src->file_name);
    if (!r.ok()) {
      w.warnings.push_back({i, 0,
                            "segment " + std::to_string(p.src->id.value) + " (" +
                                RangeText(p.src->min_ts, p.src->max_ts) +
                                ") could not be read and was skipped: " + r.status().ToString()});
      w.unreadable.push_back(p.src->id);
      return;
    }
    p.reader = std::move(r).value();
    opened[i] = 1;
    const std::vector<BlockInfo>& blocks = p.reader->blocks();
    w.stats.blocks_total += blocks.size();
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
      const BlockInfo& info = blocks[bi];
      if (info.max_ts < range.start_ms || info.min_ts >= range.end_ms) continue;
      if (count_block && p.filter->kind == K::kTrue && info.min_ts >= range.start_ms &&
          info.max_ts < range.end_ms) {
        count_block(worker, info.event_count);
        w.stats.events_scanned += info.event_count;
        w.stats.bytes_scanned += info.raw_bytes;
        continue;
      }
      if (unread && options.use_block_filters && p.filter->kind == K::kTrue &&
          info.min_ts >= range.start_ms && info.max_ts < range.end_ms &&
          !p.reader->BlockMayHaveField(bi, unread_field)) {
        unread(worker, info.event_count);
        w.stats.events_scanned += info.event_count;
        w.stats.bytes_scanned += info.raw_bytes;
        continue;
      }
      if (options.use_block_filters && !p.terms.empty() &&
          !p.reader->BlockMayContainAll(bi, p.terms)) {
        continue;
      }
      // A block without a field the filter compares: no event of it passes.
      if (options.use_block_filters &&
          std::any_of(p.fields.begin(), p.fields.end(), [&](const std::string& name) {
            return !p.reader->BlockMayHaveField(bi, name);
          })) {
        continue;
      }
      plan_tasks[i].push_back(Task{false, i, bi, 0});
    }
  }));
  std::vector<Task> tasks;
  for (size_t i = 0; i < plans.size(); ++i) {
    stats.segments_scanned += opened[i];
    tasks.insert(tasks.end(), plan_tasks[i].begin(), plan_tasks[i].end());
  }
  auto block_of = [&](const Task& t) -> const BlockInfo& {
    return plans[t.source].reader->blocks()[t.block];
  };
  if (cutter.direction > 0) {
    std::stable_sort(tasks.begin(), tasks.end(), [&](const Task& a, const Task& b) {
      return block_of(a).max_ts > block_of(b).max_ts;
    });
  } else if (cutter.direction < 0) {
    std::stable_sort(tasks.begin(), tasks.end(), [&](const Task& a, const Task& b) {
      return block_of(a).min_ts < block_of(b).min_ts;
    });
  }
  const size_t segment_tasks = tasks.size();

  // Buffered events, in chunks.
  std::vector<FilterPtr> buffered_filters(input.buffered.size());
  for (size_t i = 0; i < input.buffered.size(); ++i) {
    const BufferedSource& bs = input.buffered[i];
    if (bs.events == nullptr || bs.events->empty()) continue;
    buffered_filters[i] = Specialize(query.filter, bs.datasource);
    if (buffered_filters[i]->kind == K::kFalse) continue;
    for (size_t b = 0; b < bs.events->size(); b += kBufferedChunk) {
      tasks.push_back(Task{true, i, b, std::min(bs.events->size(), b + kBufferedChunk)});
    }
  }

  if (cutter.direction != 0) {
    // Buffered events first: their times are unknown to the index, and they fill the collector.
    std::rotate(tasks.begin(), tasks.begin() + static_cast<ptrdiff_t>(segment_tasks), tasks.end());
  }
  std::atomic<int64_t> cut_at{cutter.direction > 0 ? std::numeric_limits<int64_t>::min()
                                                   : std::numeric_limits<int64_t>::max()};

  // After a block: the worker's collector may allow a later cut (never an earlier one).
  auto raise_cut = [&](size_t worker) {
    if (cutter.direction == 0) return;
    std::optional<int64_t> c = cutter.cut(worker);
    if (!c) return;
    int64_t cur = cut_at.load(std::memory_order_relaxed);
    while ((cutter.direction > 0 ? *c > cur : *c < cur) &&
           !cut_at.compare_exchange_weak(cur, *c, std::memory_order_relaxed)) {
    }
  };

  // Phase 2: scan.
  QueryProgress* progress = options.progress;
  if (progress != nullptr) progress->tasks_total.fetch_add(tasks.size(), std::memory_order_relaxed);
  std::atomic<bool> stopped{false};
  RETURN_IF_ERROR(ParallelFor(threads, tasks.size(), [&](size_t worker, size_t ti) {
    if (stop()) {
      stopped.store(true, std::memory_order_relaxed);
      return;
    }
    const Task& t = tasks[ti];
    ScanWorker& w = workers[worker];
    struct Done {
      QueryProgress* progress;
      ScanWorker& w;
      uint64_t events0, bytes0;
      ~Done() {
        if (progress == nullptr) return;
        progress->tasks_done.fetch_add(1, std::memory_order_relaxed);
        progress->events_scanned.fetch_add(w.stats.events_scanned - events0,
                                           std::memory_order_relaxed);
        progress->bytes_scanned.fetch_add(w.stats.bytes_scanned - bytes0,
                                          std::memory_order_relaxed);
      }
    } done{progress, w, w.stats.events_scanned, w.stats.bytes_scanned};
    if (t.buffered) {
      const BufferedSource& bs = input.buffered[t.source];
      BuildBufferedBlock(*bs.events, t.block, t.end, range, &w.block);
      w.view.Init(&w.block, &bs.datasource, bs.partition);
      ScanBlock(*buffered_filters[t.source], range, 0, /*inside=*/false, &w);
      visit(worker, ti, static_cast<const BlockView&>(w.view), static_cast<const Mask&>(w.matched));
      raise_cut(worker);
      return;
    }
    const SegmentPlan& p = plans[t.source];
    if (cutter.direction != 0) {
      const BlockInfo& info = p.reader->blocks()[t.block];
      const int64_t at = cut_at.load(std::memory_order_relaxed);
      if (cutter.direction > 0 ? info.max_ts < at : info.min_ts > at) return;
    }
    const BlockInfo& bi = p.reader->blocks()[t.block];
    const bool inside = bi.min_ts >= range.start_ms && bi.max_ts < range.end_ms;
    const ColumnSelection& sel = inside ? columns : ordered_columns;
    Status st = p.reader->ReadBlockColumns(t.block, sel, &w.block);
    if (st.ok() && !ValidBlockShape(w.block, sel.all || sel.order)) {
      st = Status::Corruption("decoded block has inconsistent event arrays");
    }
    if (!st.ok()) {
      const BlockInfo& info = p.reader->blocks()[t.block];
      w.warnings.push_back({t.source, t.block + 1,
                            "segment " + std::to_string(p.src->id.value) + " block " +
                                std::to_string(t.block) + " (" +
                                RangeText(info.min_ts, info.max_ts) +
                                ") could not be read and was skipped: " + st.ToString()});
      w.unreadable.push_back(p.src->id);
      return;
    }
    ++w.stats.blocks_scanned;
    w.view.Init(&w.block, &p.src->datasource, p.src->partition);
    ScanBlock(*p.filter, range, bi.raw_bytes, inside, &w);
    visit(worker, ti, static_cast<const BlockView&>(w.view), static_cast<const Mask&>(w.matched));
    raise_cut(worker);
  }));
  out.stopped = stopped.load();

  // Merge statistics and warnings.
  std::vector<Warning> warnings;
  for (ScanWorker& w : workers) {
    stats.blocks_total += w.stats.blocks_total;
    stats.blocks_scanned += w.stats.blocks_scanned;
    stats.events_scanned += w.stats.events_scanned;
    stats.bytes_scanned += w.stats.bytes_scanned;
    for (Warning& wr : w.warnings) warnings.push_back(std::move(wr));
    out.unreadable.insert(out.unreadable.end(), w.unreadable.begin(), w.unreadable.end());
  }
  std::sort(out.unreadable.begin(), out.unreadable.end());
  out.unreadable.erase(std::unique(out.unreadable.begin(), out.unreadable.end()),
                       out.unreadable.end());
  std::sort(warnings.begin(), warnings.end(), [](const Warning& a, const Warning& b) {
    return std::tie(a.order_a, a.order_b) < std::tie(b.order_a, b.order_b);
  });
  for (Warning& w : warnings) out.warnings.push_back(std::move(w.text));
  return out;
}

int64_t MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

Status LimitStatus(const ExecOptions& options) {
  if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
    return Status::Cancelled("the query was cancelled");
  }
  if (options.deadline && std::chrono::steady_clock::now() > *options.deadline) {
    return Status::DeadlineExceeded("the query did not finish within its time limit");
  }
  return Status::OK();
}

// Shared by the workers of one ExecutePartial: the first limit that was hit, and the collectors'
// memory as last reported by each worker.
struct Limits {
  const ExecOptions* options = nullptr;
  std::string stage_name;
  std::mutex mu;
  Status failed;
  std::atomic<bool> stop{false};
  std::vector<std::atomic<size_t>> memory;

  Limits(const ExecOptions* o, size_t workers, std::string name)
      : options(o), stage_name(std::move(name)), memory(workers) {}

  void Fail(Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (failed.ok()) failed = std::move(st);
    stop.store(true, std::memory_order_relaxed);
  }
  bool Check() {
    if (stop.load(std::memory_order_relaxed)) return true;
    Status st = LimitStatus(*options);
    if (!st.ok()) {
      Fail(std::move(st));
      return true;
    }
    return false;
  }
  void Report(size_t worker, size_t bytes) {
    memory[worker].store(bytes, std::memory_order_relaxed);
    if (options->max_memory_bytes == 0) return;
    size_t total = 0;
    for (const auto& m : memory) total += m.load(std::memory_order_relaxed);
    if (total > options->max_memory_bytes) {
      Fail(Status::ResourceExhausted(
          stage_name + " needs more than the query memory bound of " +
          std::to_string(options->max_memory_bytes) +
          " bytes; narrow the search, the time range or the number of groups"));
    }
  }
};

Result<PartialResult> ExecutePartialImpl(Env* env, const CompiledQuery& query,
                                         const TimeRange& range, const ScanInput& input,
                                         const ExecOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(LimitStatus(options));
  RETURN_IF_ERROR(CheckTablesBound(query));
  const size_t collect = CollectIndex(query);
  CollectorContext ctx;
  ctx.range = range;
  ctx.max_events = options.max_events;
  const size_t workers = static_cast<size_t>(std::max(1, options.threads));
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::vector<std::vector<Record>>> scratch(workers);
  std::vector<Record> records(workers);  // each worker's current record, reused for every event
  for (size_t w = 0; w < workers; ++w) {
    collectors.push_back(MakeCollector(query, collect, ctx));
    scratch[w].resize(collect);
  }
  std::vector<uint64_t> matched(workers, 0);
  // regex(...) | groupBy(group): counted block by block without records.
  std::vector<std::unique_ptr<RegexGroupCounter>> regex_counters(workers);
  for (size_t w = 0; w < workers; ++w) {
    regex_counters[w] = RegexGroupCounter::For(query, collect, *collectors[w]);
  }
  // A stage that only counts in total counts whole blocks from the segment index.
  std::function<void(size_t, uint64_t)> count_block;
  if (collect == 0 && collectors[0]->AddCount(0)) {
    count_block = [&](size_t worker, uint64_t n) {
      collectors[worker]->AddCount(n);
      matched[worker] += n;
      if (options.progress != nullptr) {
        options.progress->events_matched.fetch_add(n, std::memory_order_relaxed);
      }
    };
  }
  // A collector that only takes events with some field: blocks without it are counted as matched
  // without being read.
  std::string unread_field;
  std::function<void(size_t, uint64_t)> unread;
  if (collect == 0 && !count_block) unread_field = collectors[0]->ContributingField();
  if (!unread_field.empty()) {
    unread = [&](size_t worker, uint64_t n) {
      matched[worker] += n;
      if (options.progress != nullptr) {
        options.progress->events_matched.fetch_add(n, std::memory_order_relaxed);
      }
    };
  }
  TimeCutter cutter;
  if (collect == 0 && collectors[0]->KeepsByTime() != 0) {
    cutter.direction = collectors[0]->KeepsByTime();
    cutter.cut = [&](size_t worker) { return collectors[worker]->TimeCut(); };
  }
  Limits limits(&options, workers,
                collect < query.stages.size() ? query.stages[collect].function + "()"
                                              : std::string("the search (non-aggregate results)"));
  QueryProgress* progress = options.progress;
  ASSIGN_OR_RETURN(ScanOutcome scan,
                   Scan(
                       env, query, ScanColumns(query), range, input, options, count_block,
                       unread_field, unread, cutter,
                       [&](size_t worker, size_t /*task*/, const BlockView& v, const Mask& m) {
                         Collector& c = *collectors[worker];
                         Record& rec = records[worker];
                         uint64_t n = 0;
                         auto slow = [&](size_t i) {
                           rec.ResetToEvent(EventRef{v.b, v.ds, v.partition, i});
                           RunTransforms(query.stages, 0, collect, rec, &scratch[worker],
                                         [&c](const Record& r) { c.Add(r); });
                         };
                         if ((collect == 0 && c.AddBlock(*v.b, m)) ||
                             (regex_counters[worker] != nullptr &&
                              regex_counters[worker]->Run(*v.b, m, c, slow))) {
                           for (size_t i = 0; i < v.n; ++i) n += m[i] != 0;
                         } else {
                           for (size_t i = 0; i < v.n; ++i) {
                             if (!m[i]) continue;
                             ++n;
                             slow(i);
                           }
                         }
                         matched[worker] += n;
                         if (progress != nullptr) {
                           progress->events_matched.fetch_add(n, std::memory_order_relaxed);
                         }
                         limits.Report(worker, c.MemoryBytes());
                       },
                       [&] { return limits.Check(); }));
  if (!limits.failed.ok()) return limits.failed;

  PartialResult out;
  out.stats = scan.stats;
  for (uint64_t n : matched) out.stats.events_matched += n;
  out.warnings = std::move(scan.warnings);
  out.unreadable_segments = std::move(scan.unreadable);
  for (size_t w = 1; w < workers; ++w) collectors[0]->Merge(*collectors[w]);
  collectors.resize(1);
  if (options.max_memory_bytes != 0 && collectors[0]->MemoryBytes() > options.max_memory_bytes) {
    return Status::ResourceExhausted(limits.stage_name +
                                     " needs more than the query memory bound of " +
                                     std::to_string(options.max_memory_bytes) + " bytes");
  }
  out.collector = std::move(collectors[0]);
  out.stats.elapsed_ms = MillisSince(t0);
  return out;
}

// Runs stages [begin, end) over rows on one thread: per-record stages record by record, a
// collecting stage over all of its input.
Result<std::vector<Row>> RunRowStages(const CompiledQuery& query, size_t begin,
                                      std::vector<Row> rows, const CollectorContext& ctx,
                                      const ExecOptions& options,
                                      std::vector<std::string>* warnings) {
  const std::vector<Stage>& stages = query.stages;
  size_t s = begin;
  std::vector<std::vector<Record>> scratch(stages.size());
  while (s < stages.size()) {
    RETURN_IF_ERROR(LimitStatus(options));
    // The per-record stages up to the next collecting stage, then that stage.
    size_t next = s;
    while (next < stages.size() && stages[next].IsTransform()) ++next;
    std::vector<Row> out;
    std::unique_ptr<Collector> c;
    if (next < stages.size()) c = NewCollector(stages[next], ctx);
    for (size_t i = 0; i < rows.size(); ++i) {
      RecordKey key;
      key.offset = static_cast<int64_t>(i);
      Record rec = Record::FromRow(std::move(rows[i]), key);
      RunTransforms(stages, s, next, rec, &scratch, [&](const Record& r) {
        if (c) {
          c->Add(r);
        } else {
          out.push_back(r.ToRow());
        }
      });
    }
    if (c) {
      if (options.max_memory_bytes != 0 && c->MemoryBytes() > options.max_memory_bytes) {
        return Status::ResourceExhausted(stages[next].function +
                                         "() needs more than the query memory bound of " +
                                         std::to_string(options.max_memory_bytes) + " bytes");
      }
      out = c->Finish(warnings);
      s = next + 1;
    } else {
      s = next;
    }
    rows = std::move(out);
  }
  return rows;
}

Result<QueryResult> FinishPartialsImpl(const CompiledQuery& query, const TimeRange& range,
                                       std::vector<PartialResult> partials,
                                       const ExecOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t collect = CollectIndex(query);
  CollectorContext ctx;
  ctx.range = range;
  ctx.max_events = options.max_events;
  const Stage* collect_stage = collect < query.stages.size() ? &query.stages[collect] : nullptr;
  QueryResult result;
  result.is_aggregate = query.is_aggregate;
  std::shared_ptr<Collector> all;
  int64_t elapsed = 0;
  for (size_t i = 0; i < partials.size(); ++i) {
    PartialResult& p = partials[i];
    std::shared_ptr<Collector> c = p.collector;
    if (c == nullptr) {
      auto decoded = DecodeCollector(collect_stage, ctx, p.state);
      if (!decoded.ok()) {
        return Status::Corruption("partial result " + std::to_string(i) + ": " +
                                  decoded.status().message());
      }
      c = std::move(decoded).value();
    }
    if (all == nullptr) {
      all = std::move(c);
    } else {
      all->Merge(*c);
    }
    const QueryStats& s = p.stats;
    QueryStats& t = result.stats;
    t.segments_total += s.segments_total;
    t.segments_scanned += s.segments_scanned;
    t.blocks_total += s.blocks_total;
    t.blocks_scanned += s.blocks_scanned;
    t.events_scanned += s.events_scanned;
    t.events_matched += s.events_matched;
    t.bytes_scanned += s.bytes_scanned;
    elapsed = std::max(elapsed, s.elapsed_ms);
    for (std::string& w : p.warnings) result.warnings.push_back(std::move(w));
    result.unreadable_segments.insert(result.unreadable_segments.end(),
                                      p.unreadable_segments.begin(), p.unreadable_segments.end());
  }
  if (all == nullptr) all = MakeCollector(query, collect, ctx);
  if (options.max_memory_bytes != 0 && all->MemoryBytes() > options.max_memory_bytes) {
    return Status::ResourceExhausted(
        (collect_stage ? collect_stage->function + "()" : std::string("the search")) +
        " needs more than the query memory bound of " + std::to_string(options.max_memory_bytes) +
        " bytes");
  }
  std::sort(result.unreadable_segments.begin(), result.unreadable_segments.end());
  result.unreadable_segments.erase(
      std::unique(result.unreadable_segments.begin(), result.unreadable_segments.end()),
      result.unreadable_segments.end());
  // The collecting stage's rows, or those of the next stage when it directly follows and the
  // collector can give them without building every row (groupBy then sort(limit=)).
  size_t rest = collect + 1;
  std::optional<std::vector<Row>> through;
  if (rest < query.stages.size() && !query.stages[rest].IsTransform()) {
    through = all->FinishThrough(query.stages[rest], &result.warnings);
  }
  std::vector<Row> rows;
  if (through) {
    rows = std::move(*through);
    ++rest;
  } else {
    rows = all->Finish(&result.warnings);
  }
  all.reset();
  partials.clear();
  ASSIGN_OR_RETURN(result.rows,
                   RunRowStages(query, rest, std::move(rows), ctx, options, &result.warnings));
  result.stats.elapsed_ms = elapsed + MillisSince(t0);
  return result;
}

// Event i of a scanned block, copied out of the block's buffer.
PositionedEvent ToPositionedEvent(const DecodedBlock& b, size_t i) {
  PositionedEvent pe;
  pe.pos = b.positions[i];
  pe.event.timestamp_ms = b.timestamps[i];
  pe.event.ingest_ms = b.ingest_ts[i];
  pe.event.raw.assign(b.raw[i]);
  pe.event.fields.reserve(b.FieldCount(i));
  b.ForEachField(i, [&pe](std::string_view name, std::string_view value) {
    pe.event.fields.push_back(Field{std::string(name), std::string(value)});
  });
  return pe;
}

// The matches of one scan task.
struct MatchPiece {
  size_t task = 0;
  const Datasource* ds = nullptr;
  PartitionId partition;
  std::vector<PositionedEvent> events;
};

Result<MatchSet> CollectMatchesImpl(Env* env, const CompiledQuery& query, const TimeRange& range,
                                    const ScanInput& input, const ExecOptions& options,
                                    size_t max_events) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(CheckTablesBound(query));
  std::vector<std::vector<MatchPiece>> per_worker(
      static_cast<size_t>(std::max(1, options.threads)));
  std::atomic<size_t> found{0};
  ASSIGN_OR_RETURN(ScanOutcome scan,
                   Scan(
                       env, query, ColumnSelection{}, range, input, options, nullptr, std::string(),
                       nullptr, TimeCutter{},
                       [&](size_t worker, size_t task, const BlockView& v, const Mask& matched) {
                         MatchPiece piece;
                         for (size_t i = 0; i < v.n; ++i) {
                           if (matched[i]) piece.events.push_back(ToPositionedEvent(*v.b, i));
                         }
                         if (piece.events.empty()) return;
                         found.fetch_add(piece.events.size(), std::memory_order_relaxed);
                         piece.task = task;
                         piece.ds = v.ds;
                         piece.partition = v.partition;
                         per_worker[worker].push_back(std::move(piece));
                       },
                       [&] { return found.load(std::memory_order_relaxed) >= max_events; }));

  MatchSet out;
  out.stats = scan.stats;
  out.warnings = std::move(scan.warnings);
  out.unreadable_segments = std::move(scan.unreadable);
  out.truncated = scan.stopped;
  const size_t total = found.load();
  out.stats.events_matched = total;

  std::vector<MatchPiece> pieces;
  for (std::vector<MatchPiece>& w : per_worker) {
    for (MatchPiece& p : w) pieces.push_back(std::move(p));
  }
  per_worker.clear();
  std::sort(pieces.begin(), pieces.end(),
            [](const MatchPiece& a, const MatchPiece& b) { return a.task < b.task; });

  // Group by (datasource, partition) in order of first appearance; keep at most max_events,
  // dropping from the last tasks.
  std::map<std::pair<std::string, int32_t>, size_t> index;
  std::vector<std::shared_ptr<std::vector<PositionedEvent>>> events;
  size_t kept = 0;
  for (MatchPiece& p : pieces) {
    if (kept >= max_events) {
      out.truncated = true;
      break;
    }
    if (p.events.size() > max_events - kept) {
      p.events.resize(max_events - kept);
      out.truncated = true;
    }
    kept += p.events.size();
    auto [it, inserted] =
        index.try_emplace(std::make_pair(p.ds->Key(), p.partition.value), out.sources.size());
    if (inserted) {
      BufferedSource src;
      src.datasource = *p.ds;
      src.partition = p.partition;
      out.sources.push_back(std::move(src));
      events.push_back(std::make_shared<std::vector<PositionedEvent>>());
    }
    std::vector<PositionedEvent>& dst = *events[it->second];
    if (dst.empty()) {
      dst = std::move(p.events);
    } else {
      dst.insert(dst.end(), std::make_move_iterator(p.events.begin()),
                 std::make_move_iterator(p.events.end()));
    }
  }
  auto by_pos = [](const PositionedEvent& a, const PositionedEvent& b) { return a.pos < b.pos; };
  for (size_t s = 0; s < out.sources.size(); ++s) {
    std::vector<PositionedEvent>& v = *events[s];
    if (!std::is_sorted(v.begin(), v.end(), by_pos)) std::stable_sort(v.begin(), v.end(), by_pos);
    out.sources[s].events = std::move(events[s]);
  }
  out.stats.elapsed_ms = MillisSince(t0);
  return out;
}

}  // namespace

Result<QueryResult> Execute(Env* env, const CompiledQuery& query, const TimeRange& range,
                            const ScanInput& input, const ExecOptions& options) {
  try {
    ASSIGN_OR_RETURN(PartialResult partial, ExecutePartialImpl(env, query, range, input, options));
    std::vector<PartialResult> partials;
    partials.push_back(std::move(partial));
    return FinishPartialsImpl(query, range, std::move(partials), options);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("query execution failed: ") + e.what());
  }
}

Result<PartialResult> ExecutePartial(Env* env, const CompiledQuery& query, const TimeRange& range,
                                     const ScanInput& input, const ExecOptions& options) {
  try {
    return ExecutePartialImpl(env, query, range, input, options);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("query execution failed: ") + e.what());
  }
}

Result<QueryResult> FinishPartials(const CompiledQuery& query, const TimeRange& range,
                                   std::vector<PartialResult> partials,
                                   const ExecOptions& options) {
  try {
    return FinishPartialsImpl(query, range, std::move(partials), options);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("query execution failed: ") + e.what());
  }
}

Result<MatchSet> CollectMatches(Env* env, const CompiledQuery& query, const TimeRange& range,
                                const ScanInput& input, const ExecOptions& options,
                                size_t max_events) {
  try {
    return CollectMatchesImpl(env, query, range, input, options, max_events);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("collecting matches failed: ") + e.what());
  }
}

bool IsAggregate(const CompiledQuery& query) { return query.is_aggregate; }

}  // namespace sediment::query
