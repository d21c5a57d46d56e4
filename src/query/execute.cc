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
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "common/time_parse.h"
#include "query/compiled.h"
#include "query/query.h"
#include "segment/segment.h"

namespace sediment::query {
namespace {

using K = FilterNode::Kind;
using Mask = std::vector<uint8_t>;

// Events per task when scanning buffered (not yet flushed) events.
constexpr size_t kBufferedChunk = 4096;

// One decoded block under evaluation, with where its raw strings lie.
struct BlockView {
  const DecodedBlock* b = nullptr;
  const Datasource* ds = nullptr;
  PartitionId partition;
  size_t n = 0;
  // True when the non-empty raw strings lie in ascending, non-overlapping order in memory, so a
  // search can run over [base, run_end) and map hits back through `starts`.
  bool contiguous = false;
  const char* base = nullptr;
  const char* run_end = nullptr;
  std::vector<size_t> starts;  // offset of raw[i] from base (monotone when contiguous)

  void Init(const DecodedBlock* block, const Datasource* d, PartitionId p) {
    b = block;
    ds = d;
    partition = p;
    n = block->size();
    starts.assign(n, 0);
    contiguous = false;
    base = nullptr;
    uintptr_t prev_end = 0;
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view r = block->raw[i];
      if (r.empty()) continue;
      uintptr_t d0 = reinterpret_cast<uintptr_t>(r.data());
      if (base == nullptr) {
        base = r.data();
      } else if (d0 < prev_end) {
        ok = false;
        break;
      }
      prev_end = d0 + r.size();
    }
    if (!ok || base == nullptr) return;
    contiguous = true;
    const uintptr_t b0 = reinterpret_cast<uintptr_t>(base);
    size_t last_end = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view r = block->raw[i];
      if (r.empty()) {
        starts[i] = last_end;
      } else {
        starts[i] = reinterpret_cast<uintptr_t>(r.data()) - b0;
        last_end = starts[i] + r.size();
      }
    }
    run_end = base + last_end;
  }
};

// Value of `name` for event i: built-ins, tags, then the event's fields.
std::optional<std::string_view> Lookup(const BlockView& v, size_t i, const std::string& name,
                                       std::string* scratch) {
  const DecodedBlock& b = *v.b;
  if (!name.empty() && name[0] == '@') {
    if (name == "@rawstring") return b.raw[i];
    if (name == "@timestamp") {
      *scratch = std::to_string(b.timestamps[i]);
      return std::string_view(*scratch);
    }
    if (name == "@ingesttimestamp") {
      *scratch = std::to_string(b.ingest_ts[i]);
      return std::string_view(*scratch);
    }
    if (name == "@id") {
      *scratch = FormatEventId(v.partition, b.positions[i]);
      return std::string_view(*scratch);
    }
  } else if (!name.empty() && name[0] == '#') {
    for (const auto& [k, val] : v.ds->tags) {
      if (k == name) return std::string_view(val);
    }
    if (name == "#repo") return std::string_view(v.ds->repo);
    return std::nullopt;
  }
  for (uint32_t f = b.field_begin[i]; f < b.field_begin[i + 1]; ++f) {
    if (b.fields[f].name == name) return b.fields[f].value;
  }
  return std::nullopt;
}

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
  if (!v.contiguous || count * 8 < v.n) {
    for (size_t i = 0; i < v.n; ++i) {
      if (cand[i] && s.Contains(b.raw[i])) (*out)[i] = 1;
    }
    return;
  }
  size_t i = NextCandidate(cand, 0);
  while (i < v.n) {
    const char* p = s.Find(v.base + v.starts[i], v.run_end);
    if (p == nullptr) break;
    const size_t off = static_cast<size_t>(p - v.base);
    // Last event starting at or before the hit (never before i).
    size_t j = static_cast<size_t>(std::upper_bound(v.starts.begin() + static_cast<ptrdiff_t>(i),
                                                    v.starts.end(), off) -
                                   v.starts.begin()) -
               1;
    if (cand[j] && off + len <= v.starts[j] + b.raw[j].size()) (*out)[j] = 1;
    // A hit crossing event j's end rules out any later start inside j as well.
    i = NextCandidate(cand, j + 1);
  }
}

// Whether the pieces occur in `hay` in order without overlapping (ASCII case-insensitive): the
// unanchored wildcard match. Leftmost matching of each piece is optimal.
bool GlobPiecesInOrder(const std::vector<CiSearcher>& pieces, std::string_view hay) {
  const char* p = hay.data();
  const char* end = hay.data() + hay.size();
  for (const CiSearcher& piece : pieces) {
    const char* at = piece.Find(p, end);
    if (at == nullptr) return false;
    p = at + piece.size();
  }
  return true;
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
      EvalText(*node.searcher, v, cand, out);
      return;
    case K::kTextGlob:
      for (size_t i = 0; i < v.n; ++i) {
        if (cand[i] && GlobPiecesInOrder(node.pieces, b.raw[i])) (*out)[i] = 1;
      }
      return;
    case K::kRawRegex:
      for (size_t i = 0; i < v.n; ++i) {
        if (cand[i] &&
            RE2::PartialMatch(re2::StringPiece(b.raw[i].data(), b.raw[i].size()), *node.re)) {
          (*out)[i] = 1;
        }
      }
      return;
    case K::kFieldEq:
    case K::kFieldGlob:
    case K::kFieldRegex:
      for (size_t i = 0; i < v.n; ++i) {
        if (!cand[i]) continue;
        std::optional<std::string_view> val = Lookup(v, i, node.field, &scratch);
        if (!val) continue;
        bool m = node.kind == K::kFieldEq ? *val == node.text
                 : node.kind == K::kFieldGlob
                     ? GlobMatch(node.text, *val)
                     : RE2::PartialMatch(re2::StringPiece(val->data(), val->size()), *node.re);
        if (m) (*out)[i] = 1;
      }
      return;
  }
}

struct EventKey {
  int64_t ts = 0;
  int32_t partition = 0;
  int64_t offset = 0;
  uint32_t index = 0;
  auto operator<=>(const EventKey&) const = default;
};

struct Collected {
  EventKey key;
  Row row;
};

bool IsBuiltin(std::string_view name) {
  return name == "@timestamp" || name == "@rawstring" || name == "@id" ||
         name == "@ingesttimestamp" || name == "#repo";
}

Row MakeRow(const BlockView& v, size_t i) {
  const DecodedBlock& b = *v.b;
  Row r;
  r.reserve(5 + v.ds->tags.size() + (b.field_begin[i + 1] - b.field_begin[i]));
  r.emplace_back("@timestamp", b.timestamps[i]);
  r.emplace_back("@rawstring", std::string(b.raw[i]));
  r.emplace_back("@id", FormatEventId(v.partition, b.positions[i]));
  r.emplace_back("@ingesttimestamp", b.ingest_ts[i]);
  r.emplace_back("#repo", v.ds->repo);
  for (const auto& [k, val] : v.ds->tags) {
    if (!IsBuiltin(k)) r.emplace_back(k, val);
  }
  for (uint32_t f = b.field_begin[i]; f < b.field_begin[i + 1]; ++f) {
    std::string_view name = b.fields[f].name;
    if (IsBuiltin(name) || (!name.empty() && name[0] == '#')) continue;
    r.emplace_back(std::string(name), std::string(b.fields[f].value));
  }
  return r;
}

// Length-prefixed concatenation: distinct value lists give distinct keys.
std::string GroupKey(const std::vector<std::string>& values) {
  std::string key;
  for (const std::string& v : values) {
    key += std::to_string(v.size());
    key += ':';
    key += v;
  }
  return key;
}

struct Group {
  std::vector<std::string> values;
  uint64_t count = 0;
};

// Per-worker partial result of the first pipeline stage (or of the plain event stream).
struct Collector {
  enum class Mode { kNewest, kOldest, kCount, kGroupBy } mode = Mode::kNewest;
  size_t k = 0;                     // kNewest / kOldest capacity
  std::vector<std::string> fields;  // kGroupBy
  uint64_t matched = 0;
  std::vector<Collected> heap;  // kNewest: min-heap; kOldest: max-heap (by key)
  std::unordered_map<std::string, Group> groups;

  static bool NewestCmp(const Collected& a, const Collected& b) { return a.key > b.key; }
  static bool OldestCmp(const Collected& a, const Collected& b) { return a.key < b.key; }

  void Add(const BlockView& v, size_t i) {
    ++matched;
    const DecodedBlock& b = *v.b;
    switch (mode) {
      case Mode::kCount:
        return;
      case Mode::kGroupBy: {
        std::vector<std::string> values;
        values.reserve(fields.size());
        std::string scratch;
        for (const std::string& f : fields) {
          std::optional<std::string_view> val = Lookup(v, i, f, &scratch);
          if (!val) return;  // events without a group field are not grouped
          values.emplace_back(*val);
        }
        std::string key = GroupKey(values);
        Group& g = groups[key];
        if (g.count == 0) g.values = std::move(values);
        ++g.count;
        return;
      }
      case Mode::kNewest:
      case Mode::kOldest: {
        if (k == 0) return;
        EventKey key{b.timestamps[i], v.partition.value, b.positions[i].offset.value,
                     b.positions[i].index};
        auto cmp = mode == Mode::kNewest ? NewestCmp : OldestCmp;
        if (heap.size() >= k) {
          bool better = mode == Mode::kNewest ? key > heap.front().key : key < heap.front().key;
          if (!better) return;
          std::pop_heap(heap.begin(), heap.end(), cmp);
          heap.pop_back();
        }
        heap.push_back(Collected{key, MakeRow(v, i)});
        std::push_heap(heap.begin(), heap.end(), cmp);
        return;
      }
    }
  }
};

// ---- row pipeline ----

std::string ValueToString(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", std::get<double>(v));
  return buf;
}

const Value* RowGet(const Row& r, const std::string& name) {
  for (const auto& [k, v] : r) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::optional<double> AsNumber(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  const std::string& s = std::get<std::string>(v);
  if (s.empty()) return std::nullopt;
  double out = 0;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), out);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return out;
}

int CompareValues(const Value& a, const Value& b) {
  std::optional<double> na = AsNumber(a), nb = AsNumber(b);
  if (na && nb) return *na < *nb ? -1 : (*na > *nb ? 1 : 0);
  std::string sa = ValueToString(a), sb = ValueToString(b);
  return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

std::vector<Row> GroupRows(const std::vector<Group*>& groups, const Stage& st,
                           std::vector<std::string>* warnings) {
  std::vector<Row> rows;
  size_t n = std::min(groups.size(), static_cast<size_t>(st.limit));
  if (groups.size() > n) {
    warnings->push_back("groupBy: " + std::to_string(groups.size()) +
                        " groups exceed limit=" + std::to_string(st.limit) + "; kept the first " +
                        std::to_string(n) + " in key order");
  }
  rows.reserve(n);
  for (size_t g = 0; g < n; ++g) {
    Row r;
    for (size_t f = 0; f < st.fields.size(); ++f)
      r.emplace_back(st.fields[f], groups[g]->values[f]);
    r.emplace_back("_count", static_cast<int64_t>(groups[g]->count));
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<Group*> SortedGroups(std::unordered_map<std::string, Group>* groups) {
  std::vector<Group*> out;
  out.reserve(groups->size());
  for (auto& [k, g] : *groups) out.push_back(&g);
  std::sort(out.begin(), out.end(),
            [](const Group* a, const Group* b) { return a->values < b->values; });
  return out;
}

// Applies one stage to a row stream. `events_in` tells whether the rows are still events in
// @timestamp order (before any aggregate).
std::vector<Row> ApplyStage(const Stage& st, std::vector<Row> rows, bool events_in,
                            std::vector<std::string>* warnings) {
  const size_t limit = static_cast<size_t>(st.limit);
  switch (st.kind) {
    case Stage::Kind::kCount: {
      std::vector<Row> out(1);
      out[0].emplace_back("_count", static_cast<int64_t>(rows.size()));
      return out;
    }
    case Stage::Kind::kHead:
      if (rows.size() > limit) rows.resize(limit);
      return rows;
    case Stage::Kind::kTail:
      if (rows.size() > limit) rows.erase(rows.begin(), rows.end() - static_cast<ptrdiff_t>(limit));
      return rows;
    case Stage::Kind::kSort: {
      std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        for (const std::string& f : st.fields) {
          const Value* va = RowGet(a, f);
          const Value* vb = RowGet(b, f);
          if (va == nullptr || vb == nullptr) {
            if (va == vb) continue;
            return vb == nullptr;  // rows lacking the field go last
          }
          int c = CompareValues(*va, *vb);
          if (c != 0) return st.descending ? c > 0 : c < 0;
        }
        return false;
      });
      if (rows.size() > limit) {
        warnings->push_back("sort: kept the first " + std::to_string(limit) + " of " +
                            std::to_string(rows.size()) + " rows (limit=" + std::to_string(limit) +
                            ")");
        rows.resize(limit);
      }
      return rows;
    }
    case Stage::Kind::kTable: {
      if (rows.size() > limit) {
        warnings->push_back("table: kept " + std::to_string(limit) + " of " +
                            std::to_string(rows.size()) + " rows (limit=" + std::to_string(limit) +
                            ")");
        if (events_in) {
          rows.erase(rows.begin(), rows.end() - static_cast<ptrdiff_t>(limit));  // the newest
        } else {
          rows.resize(limit);
        }
      }
      std::vector<Row> out;
      out.reserve(rows.size());
      for (Row& r : rows) {
        Row p;
        for (const std::string& f : st.fields) {
          if (const Value* v = RowGet(r, f)) p.emplace_back(f, *v);
        }
        out.push_back(std::move(p));
      }
      return out;
    }
    case Stage::Kind::kGroupBy: {
      std::unordered_map<std::string, Group> groups;
      for (const Row& r : rows) {
        std::vector<std::string> values;
        bool complete = true;
        for (const std::string& f : st.fields) {
          const Value* v = RowGet(r, f);
          if (v == nullptr) {
            complete = false;
            break;
          }
          values.push_back(ValueToString(*v));
        }
        if (!complete) continue;
        Group& g = groups[GroupKey(values)];
        if (g.count == 0) g.values = std::move(values);
        ++g.count;
      }
      return GroupRows(SortedGroups(&groups), st, warnings);
    }
  }
  return rows;
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

struct SegmentPlan {
  const SegmentSource* src = nullptr;
  FilterPtr filter;
  std::vector<std::string> terms;
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
void ScanBlock(const FilterNode& filter, const TimeRange& range, ScanWorker* w) {
  BlockView& v = w->view;
  const DecodedBlock& b = *v.b;
  w->stats.events_scanned += v.n;
  for (size_t i = 0; i < v.n; ++i) w->stats.bytes_scanned += b.raw[i].size();
  w->cand.assign(v.n, 0);
  for (size_t i = 0; i < v.n; ++i) {
    w->cand[i] = b.timestamps[i] >= range.start_ms && b.timestamps[i] < range.end_ms;
  }
  Eval(filter, v, w->cand, &w->matched);
}

bool ValidBlockShape(const DecodedBlock& b) {
  const size_t n = b.timestamps.size();
  if (b.ingest_ts.size() != n || b.positions.size() != n || b.raw.size() != n ||
      b.field_begin.size() != n + 1) {
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (b.field_begin[i] > b.field_begin[i + 1]) return false;
  }
  return b.field_begin[n] <= b.fields.size();
}

struct ScanOutcome {
  QueryStats stats;                   // every counter but events_matched and elapsed_ms
  std::vector<std::string> warnings;  // unreadable segments / blocks, in input order
  std::vector<SegmentId> unreadable;  // segments with an unreadable part, sorted, unique
  bool stopped = false;               // `stop` ended the scan before every task ran
};

// The scan shared by Execute and CollectMatches: prunes segments (time range, datasource tags),
// opens them and prunes blocks (time range, block filters) in parallel, then scans blocks and
// 4096-event chunks of buffered events on max(1, options.threads) threads. For every scanned
// block it calls visit(worker, task, view, matched) on a worker thread, where matched[i] != 0 for
// the events of `view` in `range` that pass the filter; `task` numbers the scan tasks in input
// order (segments in order with their blocks in order, then buffered sources in order with their
// chunks in order). Calls with the same `worker` never overlap. `stop()` is asked (from worker
// threads) before each task; once it returns true the remaining tasks are skipped and
// `stopped` is set.
template <typename Visit, typename Stop>
Result<ScanOutcome> Scan(Env* env, const CompiledQuery& query, const TimeRange& range,
                         const ScanInput& input, const ExecOptions& options, Visit&& visit,
                         Stop&& stop) {
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
    p.filter = std::move(f);
    plans.push_back(std::move(p));
  }

  std::vector<ScanWorker> workers(static_cast<size_t>(threads));

  // Phase 1: open segments and prune their blocks.
  std::vector<std::vector<Task>> plan_tasks(plans.size());
  std::vector<uint8_t> opened(plans.size(), 0);
  RETURN_IF_ERROR(ParallelFor(threads, plans.size(), [&](size_t worker, size_t i) {
    SegmentPlan& p = plans[i];
    ScanWorker& w = workers[worker];
    Result<std::unique_ptr<SegmentReader>> r = SegmentReader::Open(env, p.src->path);
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
      if (options.use_block_filters && !p.terms.empty() &&
          !p.reader->BlockMayContainAll(bi, p.terms)) {
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

  // Phase 2: scan.
  std::atomic<bool> stopped{false};
  RETURN_IF_ERROR(ParallelFor(threads, tasks.size(), [&](size_t worker, size_t ti) {
    if (stop()) {
      stopped.store(true, std::memory_order_relaxed);
      return;
    }
    const Task& t = tasks[ti];
    ScanWorker& w = workers[worker];
    if (t.buffered) {
      const BufferedSource& bs = input.buffered[t.source];
      BuildBufferedBlock(*bs.events, t.block, t.end, range, &w.block);
      w.view.Init(&w.block, &bs.datasource, bs.partition);
      ScanBlock(*buffered_filters[t.source], range, &w);
      visit(worker, ti, static_cast<const BlockView&>(w.view), static_cast<const Mask&>(w.matched));
      return;
    }
    const SegmentPlan& p = plans[t.source];
    Status st = p.reader->ReadBlock(t.block, &w.block);
    if (st.ok() && !ValidBlockShape(w.block)) {
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
    ScanBlock(*p.filter, range, &w);
    visit(worker, ti, static_cast<const BlockView&>(w.view), static_cast<const Mask&>(w.matched));
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

Result<QueryResult> ExecuteImpl(Env* env, const CompiledQuery& query, const TimeRange& range,
                                const ScanInput& input, const ExecOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  QueryResult result;
  result.is_aggregate = query.is_aggregate;

  // Plan: how the first stage is collected per worker.
  Collector proto;
  size_t first_stage = 0;
  bool truncation_warning = false;
  if (!query.stages.empty() && query.stages[0].kind == Stage::Kind::kCount) {
    proto.mode = Collector::Mode::kCount;
    first_stage = 1;
  } else if (!query.stages.empty() && query.stages[0].kind == Stage::Kind::kGroupBy) {
    proto.mode = Collector::Mode::kGroupBy;
    proto.fields = query.stages[0].fields;
    first_stage = 1;
  } else if (!query.stages.empty() && query.stages[0].kind == Stage::Kind::kHead) {
    proto.mode = Collector::Mode::kOldest;
    proto.k = std::min(options.max_events, static_cast<size_t>(query.stages[0].limit));
  } else if (!query.stages.empty() && query.stages[0].kind == Stage::Kind::kTail) {
    proto.mode = Collector::Mode::kNewest;
    proto.k = std::min(options.max_events, static_cast<size_t>(query.stages[0].limit));
  } else {
    proto.mode = Collector::Mode::kNewest;
    proto.k = options.max_events;
    truncation_warning = true;
  }

  std::vector<Collector> collectors(static_cast<size_t>(std::max(1, options.threads)), proto);
  ASSIGN_OR_RETURN(ScanOutcome scan, Scan(
                                         env, query, range, input, options,
                                         [&](size_t worker, size_t /*task*/, const BlockView& v,
                                             const Mask& matched) {
                                           Collector& c = collectors[worker];
                                           for (size_t i = 0; i < v.n; ++i) {
                                             if (matched[i]) c.Add(v, i);
                                           }
                                         },
                                         [] { return false; }));
  result.stats = scan.stats;
  QueryStats& stats = result.stats;
  result.warnings = std::move(scan.warnings);
  result.unreadable_segments = std::move(scan.unreadable);
  uint64_t matched = 0;
  for (const Collector& c : collectors) matched += c.matched;
  stats.events_matched = matched;

  std::vector<Row> rows;
  switch (proto.mode) {
    case Collector::Mode::kCount:
      rows.resize(1);
      rows[0].emplace_back("_count", static_cast<int64_t>(matched));
      break;
    case Collector::Mode::kGroupBy: {
      std::unordered_map<std::string, Group> all = std::move(collectors[0].groups);
      for (size_t wi = 1; wi < collectors.size(); ++wi) {
        for (auto& [key, g] : collectors[wi].groups) {
          Group& dst = all[key];
          if (dst.count == 0) dst.values = std::move(g.values);
          dst.count += g.count;
        }
      }
      rows = GroupRows(SortedGroups(&all), query.stages[0], &result.warnings);
      break;
    }
    case Collector::Mode::kNewest:
    case Collector::Mode::kOldest: {
      std::vector<Collected> all;
      for (Collector& c : collectors) {
        for (Collected& e : c.heap) all.push_back(std::move(e));
      }
      std::sort(all.begin(), all.end(),
                [](const Collected& a, const Collected& b) { return a.key < b.key; });
      if (all.size() > proto.k) {
        if (proto.mode == Collector::Mode::kNewest) {
          all.erase(all.begin(), all.end() - static_cast<ptrdiff_t>(proto.k));
        } else {
          all.resize(proto.k);
        }
      }
      if (truncation_warning && matched > proto.k) {
        result.warnings.push_back("results limited to the newest " + std::to_string(proto.k) +
                                  " of " + std::to_string(matched) + " matching events");
      }
      rows.reserve(all.size());
      for (Collected& c : all) rows.push_back(std::move(c.row));
      break;
    }
  }
  collectors.clear();

  bool events = proto.mode == Collector::Mode::kNewest || proto.mode == Collector::Mode::kOldest;
  for (size_t s = first_stage; s < query.stages.size(); ++s) {
    rows = ApplyStage(query.stages[s], std::move(rows), events, &result.warnings);
    events = events && !query.stages[s].IsAggregate();
  }
  result.rows = std::move(rows);
  stats.elapsed_ms = MillisSince(t0);
  return result;
}

// Event i of a scanned block, copied out of the block's buffer.
PositionedEvent ToPositionedEvent(const DecodedBlock& b, size_t i) {
  PositionedEvent pe;
  pe.pos = b.positions[i];
  pe.event.timestamp_ms = b.timestamps[i];
  pe.event.ingest_ms = b.ingest_ts[i];
  pe.event.raw.assign(b.raw[i]);
  pe.event.fields.reserve(b.field_begin[i + 1] - b.field_begin[i]);
  for (uint32_t f = b.field_begin[i]; f < b.field_begin[i + 1]; ++f) {
    pe.event.fields.push_back(Field{std::string(b.fields[f].name), std::string(b.fields[f].value)});
  }
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
  std::vector<std::vector<MatchPiece>> per_worker(
      static_cast<size_t>(std::max(1, options.threads)));
  std::atomic<size_t> found{0};
  ASSIGN_OR_RETURN(ScanOutcome scan,
                   Scan(
                       env, query, range, input, options,
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
    return ExecuteImpl(env, query, range, input, options);
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
