// Collectors: bounded row keepers (events, head, tail, table), the bounded sort heap and the
// grouped aggregates (none, groupBy, bucket/timeChart, top). Encodings: WIRE.md, "Collector
// states".
//
// Aggregate semantics (LogScale names):
// - count() counts records; count(f) records having f; count(f, distinct=true) the exact number
//   of distinct values of f. Output int64 (`_count` unless `as`).
// - sum/avg/min/max/percentile read f as a decimal number ("nan", "inf" and other text are
//   skipped, as are records without f). sum, min and max stay int64 while every value is an
//   integer that fits (sum: while the exact total fits); avg and percentiles are doubles. A group
//   with no numeric value of f has no such column.
// - percentile: exact nearest rank (the smallest kept value with at least p% of the values at or
//   below it); columns `<as>_<p>`, p in shortest form: _50, _75, _99, _99.9.
// - groupBy: records lacking a group field are skipped; rows in ascending order of the values;
//   beyond `limit` groups the first `limit` in that order are kept, with a warning.
// - bucket/timeChart: _bucket = @timestamp floored to a multiple of the span (epoch-aligned).
//   Without a series field every bucket of the query range appears (count 0, other metrics
//   missing), up to kMaxFilledBuckets; with one, only (bucket, series) pairs that have records.
//   Beyond `limit` series, those whose metrics give the highest value over the whole range are
//   kept (ties: ascending series value), with a warning.
// - top: groups by the fields counting records (or summing top_sum; a record without a numeric
//   value adds 0), descending by that value, ties ascending by the values; `percent` is the share
//   of the total over every group, in percent.
//
// Merge folds only a collector made for the same stage (others are ignored: a caller bug).
#include "query/aggregate.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "query/transform.h"

namespace sediment::query {
namespace {

constexpr uint64_t kStateVersion = 1;

// First byte of every state: which collector wrote it.
enum class StateTag : uint8_t {
  kEvents = 1,
  kHead = 2,
  kTail = 3,
  kSort = 4,
  kTable = 5,
  kAggregate = 6,
  kRows = 7,
};

// A bucket series/time range filled with empty buckets only up to this many buckets.
constexpr int64_t kMaxFilledBuckets = 100000;

Status Malformed(std::string_view what) {
  return Status::Corruption("collector state: " + std::string(what));
}

// ---- encoding helpers ----

void PutDouble(std::string* out, double d) { PutFixed64(out, std::bit_cast<uint64_t>(d)); }

void PutValue(std::string* out, const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    out->push_back(0);
    PutLengthPrefixed(out, *s);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    out->push_back(1);
    PutVarsint64(out, *i);
  } else {
    out->push_back(2);
    PutDouble(out, std::get<double>(v));
  }
}

void PutRow(std::string* out, const Row& row) {
  PutVarint64(out, row.size());
  for (const auto& [name, v] : row) {
    PutLengthPrefixed(out, name);
    PutValue(out, v);
  }
}

void PutKey(std::string* out, const RecordKey& k) {
  PutVarsint64(out, k.ts);
  PutVarsint64(out, k.partition);
  PutVarsint64(out, k.offset);
  PutVarint64(out, k.index);
}

void PutHeader(std::string* out, StateTag tag) {
  out->push_back(static_cast<char>(tag));
  PutVarint64(out, kStateVersion);
}

// Reads from the front of a state; every method returns false on truncated or malformed input.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool Varint(uint64_t* v) { return GetVarint64(&in_, v); }
  bool Svarint(int64_t* v) { return GetVarsint64(&in_, v); }
  bool Byte(uint8_t* b) {
    if (in_.empty()) return false;
    *b = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool Bytes(std::string_view* s) { return GetLengthPrefixed(&in_, s); }
  bool Double(double* d) {
    uint64_t u;
    if (!GetFixed64(&in_, &u)) return false;
    *d = std::bit_cast<double>(u);
    return true;
  }
  // A count of items that take at least `min_bytes` bytes each: false when the rest of the input
  // cannot hold that many (checked before anything is allocated for them).
  bool Count(uint64_t* n, size_t min_bytes) {
    return Varint(n) && *n <= in_.size() / std::max<size_t>(min_bytes, 1);
  }
  bool GetValue(Value* v) {
    uint8_t type;
    if (!Byte(&type)) return false;
    switch (type) {
      case 0: {
        std::string_view s;
        if (!Bytes(&s)) return false;
        *v = std::string(s);
        return true;
      }
      case 1: {
        int64_t i;
        if (!Svarint(&i)) return false;
        *v = i;
        return true;
      }
      case 2: {
        double d;
        if (!Double(&d)) return false;
        *v = d;
        return true;
      }
      default:
        return false;
    }
  }
  bool GetRow(Row* row) {
    uint64_t n;
    if (!Count(&n, 3)) return false;
    row->clear();
    row->reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      std::string_view name;
      Value v;
      if (!Bytes(&name) || !GetValue(&v)) return false;
      row->emplace_back(std::string(name), std::move(v));
    }
    return true;
  }
  bool Key(RecordKey* k) {
    int64_t partition;
    uint64_t index;
    if (!Svarint(&k->ts) || !Svarint(&partition) || !Svarint(&k->offset) || !Varint(&index)) {
      return false;
    }
    if (partition < std::numeric_limits<int32_t>::min() ||
        partition > std::numeric_limits<int32_t>::max() || index > 0xffffffffu) {
      return false;
    }
    k->partition = static_cast<int32_t>(partition);
    k->index = static_cast<uint32_t>(index);
    return true;
  }
  // The tag and a known version.
  bool Header(StateTag want) {
    uint8_t tag;
    uint64_t version;
    return Byte(&tag) && tag == static_cast<uint8_t>(want) && Varint(&version) &&
           version == kStateVersion;
  }
  // Whether the rest of the input can hold `n` items of at least `min_bytes` bytes each.
  bool Fits(uint64_t n, size_t min_bytes) const { return n <= in_.size() / min_bytes; }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

size_t RowBytes(const Row& row) {
  size_t n = sizeof(Row) + row.size() * sizeof(Row::value_type);
  for (const auto& [k, v] : row) {
    n += k.size();
    if (const auto* s = std::get_if<std::string>(&v)) n += s->size();
  }
  return n;
}

const Value* RowGet(const Row& r, std::string_view name) {
  for (const auto& [k, v] : r) {
    if (k == name) return &v;
  }
  return nullptr;
}

// ---- numbers ----

// A numeric field value: an integer when its text is a decimal integer that fits int64.
struct Num {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
};

// Parses `s` as a number (NaN is not one).
bool ParseNum(std::string_view s, Num* out) {
  std::string_view t = s;
  if (!t.empty() && t[0] == '+') {
    t.remove_prefix(1);
    if (t.empty() || t[0] == '-') return false;
  }
  if (t.empty()) return false;
  // Decimal numbers only ("nan", "inf" and "0x1" are text).
  const size_t first = t[0] == '-' ? 1 : 0;
  if (first >= t.size() || !((t[first] >= '0' && t[first] <= '9') || t[first] == '.')) {
    return false;
  }
  int64_t i = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
  if (ec == std::errc() && p == t.data() + t.size()) {
    out->is_int = true;
    out->i = i;
    out->d = static_cast<double>(i);
    return true;
  }
  std::optional<double> d = ParseNumber(s);
  if (!d || std::isnan(*d)) return false;
  out->is_int = false;
  out->d = *d;
  return true;
}

// Total order used by min/max: by value; at an equal double value an integer ranks above a
// double, and -0.0 below 0.0 (so the result does not depend on the order of the input).
int CompareNum(const Num& a, const Num& b) {
  if (a.is_int && b.is_int) return a.i < b.i ? -1 : (a.i > b.i ? 1 : 0);
  if (a.d < b.d) return -1;
  if (a.d > b.d) return 1;
  if (a.is_int != b.is_int) return a.is_int ? 1 : -1;
  const bool sa = std::signbit(a.d), sb = std::signbit(b.d);
  if (sa != sb) return sa ? -1 : 1;
  return 0;
}

// Floor of ts to a multiple of span (span > 0), or nullopt on overflow.
std::optional<int64_t> FloorTo(int64_t ts, int64_t span) {
  int64_t r = ts % span;
  if (r < 0) r += span;
  if (ts < std::numeric_limits<int64_t>::min() + r) return std::nullopt;
  return ts - r;
}

// The span of timeChart(buckets=n): the range divided into n, rounded up to a whole ms.
int64_t BucketsSpan(const TimeRange& range, int64_t buckets) {
  if (range.end_ms <= range.start_ms || buckets <= 0) return 1000;
  const double width = static_cast<double>(range.end_ms) - static_cast<double>(range.start_ms);
  return std::max<int64_t>(1,
                           static_cast<int64_t>(std::ceil(width / static_cast<double>(buckets))));
}

// The bucket span for a query range when the stage gives none: about 100 buckets, the candidate
// span nearest (by ratio) to range/100; whole days beyond one day.
int64_t AutoSpan(const TimeRange& range) {
  static constexpr int64_t kCandidates[] = {1000,   5000,    10000,   30000,    60000,    300000,
                                            600000, 1800000, 3600000, 10800000, 43200000, 86400000};
  constexpr int64_t kDay = 86400000;
  if (range.end_ms <= range.start_ms) return kCandidates[0];
  const double raw =
      (static_cast<double>(range.end_ms) - static_cast<double>(range.start_ms)) / 100;
  if (raw > kDay) {
    const double days = std::round(raw / kDay);
    if (days >= 1e6) return kDay * 1000000;
    return kDay * static_cast<int64_t>(days);
  }
  int64_t best = kCandidates[0];
  double best_ratio = std::numeric_limits<double>::infinity();
  for (int64_t c : kCandidates) {
    const double cd = static_cast<double>(c);
    const double ratio = cd > raw ? cd / raw : raw / cd;
    if (ratio < best_ratio) {
      best_ratio = ratio;
      best = c;
    }
  }
  return best;
}

std::string FormatPercentile(double p) { return ValueToString(Value(p)); }

// Appends one group-key part (values are length-prefixed so distinct lists give distinct keys).
void AppendPart(std::string* key, std::string_view v) { PutLengthPrefixed(key, v); }

// Splits a multi-part key into exactly `n` parts; false when it is not such a key.
bool SplitParts(std::string_view key, size_t n, std::vector<std::string_view>* parts) {
  parts->clear();
  for (size_t i = 0; i < n; ++i) {
    std::string_view p;
    if (!GetLengthPrefixed(&key, &p)) return false;
    parts->push_back(p);
  }
  return key.empty();
}

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringSet = std::unordered_set<std::string, SvHash, std::equal_to<>>;

// Hash index from a group key to its group number: open addressing with linear probing, a
// power-of-two table at most half full, the key's hash kept in the slot.
class GroupIndex {
 public:
  static constexpr uint32_t kAbsent = 0xffffffffu;
  static uint64_t Hash(std::string_view s) { return std::hash<std::string_view>{}(s); }

  // The group whose key (keys[group]) is `key`, or kAbsent.
  uint32_t Find(std::string_view key, uint64_t h, const std::vector<std::string>& keys) const {
    if (slots_.empty()) return kAbsent;
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.group == kAbsent) return kAbsent;
      if (s.hash == h && keys[s.group] == key) return s.group;
    }
  }
  // Adds a group whose key is not in the index yet.
  void Insert(uint64_t h, uint32_t group) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    Place(h, group);
    ++count_;
  }
  size_t SlotBytes() const { return slots_.size() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t group = kAbsent;
  };
  void Place(uint64_t h, uint32_t group) {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].group != kAbsent) i = (i + 1) & mask;
    slots_[i] = Slot{h, group};
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), Slot{});
    for (const Slot& s : old) {
      if (s.group != kAbsent) Place(s.hash, s.group);
    }
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// ---- kept entries (row keepers and sort) ----

// Appends `entries` (each with a `key` and a `row`) in their order: their count, then each key
// and row.
template <typename Entry>
void PutKeyedRows(std::string* out, const std::vector<const Entry*>& entries) {
  PutVarint64(out, entries.size());
  for (const Entry* e : entries) {
    PutKey(out, e->key);
    PutRow(out, e->row);
  }
}

// Adds `e` to the heap `entries` (ordered by `less`, at most `cap` > 0 entries), first dropping
// the front entry when it is full; *bytes counts entry_bytes of every entry held.
template <typename Entry, typename Less>
void PushBounded(Entry e, size_t cap, Less less, size_t (*entry_bytes)(const Entry&),
                 std::vector<Entry>* entries, size_t* bytes) {
  if (entries->size() >= cap) {
    std::pop_heap(entries->begin(), entries->end(), less);
    *bytes -= entry_bytes(entries->back());
    entries->pop_back();
  }
  *bytes += entry_bytes(e);
  entries->push_back(std::move(e));
  std::push_heap(entries->begin(), entries->end(), less);
}

// The rows of `entries` in their order; leaves `entries` empty.
template <typename Entry>
std::vector<Row> TakeRows(std::vector<Entry>* entries) {
  std::vector<Row> rows;
  rows.reserve(entries->size());
  for (Entry& e : *entries) rows.push_back(std::move(e.row));
  entries->clear();
  return rows;
}

// =====================================================================================
// Row keepers: the implicit event collector, head, tail and table.
// =====================================================================================

class KeptRowsCollector final : public Collector {
 public:
  enum class Mode { kEvents, kHead, kTail, kTable };

  KeptRowsCollector(Mode mode, size_t cap, std::vector<std::string> columns)
      : mode_(mode), cap_(cap), columns_(std::move(columns)) {}

  void Add(const Record& r) override {
    ++total_;
    if (r.is_event()) from_events_ = true;
    if (!Wanted(r.key())) return;
    Row row;
    if (mode_ == Mode::kTable) {
      for (const std::string& f : columns_) {
        if (std::optional<Value> v = r.GetValue(f)) row.emplace_back(f, std::move(*v));
      }
    } else {
      row = r.ToRow();
    }
    Push(Entry{r.key(), std::move(row)});
  }

  void Merge(Collector& other) override {
    auto* o = dynamic_cast<KeptRowsCollector*>(&other);
    if (o == nullptr) return;  // not the same stage: a caller bug; nothing sensible to fold
    total_ += o->total_;
    from_events_ = from_events_ || o->from_events_;
    for (Entry& e : o->entries_) {
      if (Wanted(e.key)) Push(std::move(e));
    }
    o->entries_.clear();
    o->bytes_ = 0;
  }

  size_t MemoryBytes() const override { return bytes_; }

  int KeepsByTime() const override {
    if (mode_ == Mode::kTail) return 1;
    if (mode_ == Mode::kHead) return -1;
    return 0;
  }
  std::optional<int64_t> TimeCut() const override {
    if (KeepsByTime() == 0 || cap_ == 0 || entries_.size() < cap_) return std::nullopt;
    return entries_.front().key.ts;  // the heap's top is the least wanted kept record
  }

  void Encode(std::string* out) const override {
    PutHeader(out, Tag());
    PutVarint64(out, total_);
    if (mode_ == Mode::kTable) PutVarint64(out, from_events_ ? 1 : 0);
    PutKeyedRows(out, SortedEntries());
  }

  Status Decode(std::string_view bytes) {
    Reader in(bytes);
    uint64_t n;
    if (!in.Header(Tag()) || !in.Varint(&total_)) {
      return Malformed("truncated or malformed row keeper header");
    }
    if (mode_ == Mode::kTable) {
      uint64_t flags;
      if (!in.Varint(&flags) || flags > 1) return Malformed("bad table flags");
      from_events_ = flags == 1;
    }
    if (!in.Count(&n, 5)) return Malformed("truncated or malformed row keeper header");
    if (n > cap_ || n > total_) return Malformed("row keeper holds more rows than it may");
    entries_.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Entry e;
      if (!in.Key(&e.key) || !in.GetRow(&e.row)) return Malformed("truncated or malformed row");
      if (mode_ == Mode::kTable) {
        for (const auto& [name, v] : e.row) {
          if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) {
            return Malformed("table row with a column the stage does not select");
          }
        }
      }
      bytes_ += EntryBytes(e);
      entries_.push_back(std::move(e));
    }
    if (!in.done()) return Malformed("bytes after the last row");
    std::make_heap(entries_.begin(), entries_.end(), HeapLess(mode_));
    return Status::OK();
  }

  std::vector<Row> Finish(std::vector<std::string>* warnings) override {
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.key < b.key; });
    if (total_ > cap_) {
      if (mode_ == Mode::kEvents) {
        warnings->push_back("results limited to the newest " + std::to_string(cap_) + " of " +
                            std::to_string(total_) + " matching events");
      } else if (mode_ == Mode::kTable) {
        warnings->push_back("table: kept " + std::to_string(cap_) + " of " +
                            std::to_string(total_) + " rows (limit=" + std::to_string(cap_) + ")");
      }
    }
    // table() over events lists the newest first (LogScale's sortby=@timestamp, order=desc);
    // over rows of an earlier aggregate it keeps their order.
    if (mode_ == Mode::kTable && from_events_) std::reverse(entries_.begin(), entries_.end());
    bytes_ = 0;
    return TakeRows(&entries_);
  }

 private:
  struct Entry {
    RecordKey key;
    Row row;
  };

  bool KeepsOldest() const { return mode_ == Mode::kHead; }
  StateTag Tag() const {
    switch (mode_) {
      case Mode::kEvents:
        return StateTag::kEvents;
      case Mode::kHead:
        return StateTag::kHead;
      case Mode::kTail:
        return StateTag::kTail;
      case Mode::kTable:
        return StateTag::kTable;
    }
    return StateTag::kEvents;
  }
  // Heap order: the front is the kept entry that goes first when a better one arrives.
  struct HeapCmp {
    bool oldest;
    bool operator()(const Entry& a, const Entry& b) const {
      return oldest ? a.key < b.key : a.key > b.key;
    }
  };
  static HeapCmp HeapLess(Mode mode) { return HeapCmp{mode == Mode::kHead}; }
  static size_t EntryBytes(const Entry& e) { return sizeof(Entry) + RowBytes(e.row) - sizeof(Row); }

  // Whether a record with `key` would be kept now.
  bool Wanted(const RecordKey& key) const {
    if (cap_ == 0) return false;
    if (entries_.size() < cap_) return true;
    return KeepsOldest() ? key < entries_.front().key : key > entries_.front().key;
  }
  // Adds `e` (Wanted(e.key)), dropping the entry it displaces.
  void Push(Entry e) {
    PushBounded(std::move(e), cap_, HeapLess(mode_), &EntryBytes, &entries_, &bytes_);
  }
  std::vector<const Entry*> SortedEntries() const {
    std::vector<const Entry*> v;
    v.reserve(entries_.size());
    for (const Entry& e : entries_) v.push_back(&e);
    std::sort(v.begin(), v.end(), [](const Entry* a, const Entry* b) { return a->key < b->key; });
    return v;
  }

  Mode mode_;
  size_t cap_;
  std::vector<std::string> columns_;  // kTable
  uint64_t total_ = 0;                // records added (over merges)
  bool from_events_ = false;          // kTable: some input record was an event
  std::vector<Entry> entries_;        // a heap by HeapLess(mode_)
  size_t bytes_ = 0;
};

// =====================================================================================
// kRows stages (createEvents, neighbor, accumulate, ...): every input row, in key order, up to
// kMaxSequenceRows (the first ones by key), then the stage's RowsFunction over them.
// =====================================================================================

constexpr size_t kMaxSequenceRows = 200000;

class RowsCollector final : public Collector {
 public:
  explicit RowsCollector(const Stage& st) : st_(st) {}

  void Add(const Record& r) override {
    ++total_;
    if (Ignores() || !Wanted(r.key())) return;
    Push(Entry{r.key(), r.ToRow()});
  }
  bool AddBlock(const DecodedBlock&, const std::vector<uint8_t>&) override { return Ignores(); }
  bool AddCount(uint64_t) override { return Ignores(); }

  void Merge(Collector& other) override {
    auto* o = dynamic_cast<RowsCollector*>(&other);
    if (o == nullptr) return;  // not the same stage: a caller bug; nothing sensible to fold
    total_ += o->total_;
    for (Entry& e : o->entries_) {
      if (Wanted(e.key)) Push(std::move(e));
    }
    o->entries_.clear();
    o->bytes_ = 0;
  }

  size_t MemoryBytes() const override { return bytes_; }

  void Encode(std::string* out) const override {
    PutHeader(out, StateTag::kRows);
    PutVarint64(out, total_);
    std::vector<const Entry*> v;
    v.reserve(entries_.size());
    for (const Entry& e : entries_) v.push_back(&e);
    std::sort(v.begin(), v.end(), [](const Entry* a, const Entry* b) { return a->key < b->key; });
    PutKeyedRows(out, v);
  }

  Status Decode(std::string_view bytes) {
    Reader in(bytes);
    uint64_t n;
    if (!in.Header(StateTag::kRows) || !in.Varint(&total_) || !in.Count(&n, 5)) {
      return Malformed("truncated or malformed row sequence header");
    }
    if (n > kMaxSequenceRows || n > total_ || (Ignores() && n > 0)) {
      return Malformed("row sequence holds more rows than it may");
    }
    entries_.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Entry e;
      if (!in.Key(&e.key) || !in.GetRow(&e.row)) return Malformed("truncated or malformed row");
      bytes_ += EntryBytes(e);
      entries_.push_back(std::move(e));
    }
    if (!in.done()) return Malformed("bytes after the last row");
    std::make_heap(entries_.begin(), entries_.end(), Less());
    return Status::OK();
  }

  std::vector<Row> Finish(std::vector<std::string>* warnings) override {
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.key < b.key; });
    if (!Ignores() && total_ > kMaxSequenceRows) {
      warnings->push_back(st_.function + "(): used the first " + std::to_string(kMaxSequenceRows) +
                          " of " + std::to_string(total_) + " rows");
    }
    bytes_ = 0;
    std::vector<Row> rows = TakeRows(&entries_);
    if (st_.rows_function == nullptr) return rows;
    return st_.rows_function->Run(std::move(rows), warnings);
  }

 private:
  struct Entry {
    RecordKey key;
    Row row;
  };
  // Heap order: the front is the kept entry with the greatest key (the first to go).
  struct Less {
    bool operator()(const Entry& a, const Entry& b) const { return a.key < b.key; }
  };
  static size_t EntryBytes(const Entry& e) { return sizeof(Entry) + RowBytes(e.row) - sizeof(Row); }
  bool Ignores() const { return st_.rows_function && st_.rows_function->IgnoresInput(); }
  bool Wanted(const RecordKey& key) const {
    return entries_.size() < kMaxSequenceRows || key < entries_.front().key;
  }
  void Push(Entry e) {
    PushBounded(std::move(e), kMaxSequenceRows, Less(), &EntryBytes, &entries_, &bytes_);
  }

  const Stage& st_;
  uint64_t total_ = 0;
  std::vector<Entry> entries_;  // a heap by Less
  size_t bytes_ = 0;
};

// =====================================================================================
// sort(fields, order, limit): the first `limit` rows in sort order.
// =====================================================================================

// A hexadecimal number (an optional sign, an optional 0x / 0X, 1-16 hex digits), or nullopt.
std::optional<double> HexValue(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (!std::holds_alternative<std::string>(v)) return std::nullopt;
  std::string_view s = std::get<std::string>(v);
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t x = 0;
  for (char ch : s) {
    int d;
    if (ch >= '0' && ch <= '9') {
      d = ch - '0';
    } else if (ch >= 'a' && ch <= 'f') {
      d = ch - 'a' + 10;
    } else if (ch >= 'A' && ch <= 'F') {
      d = ch - 'A' + 10;
    } else {
      return std::nullopt;
    }
    x = x * 16 + static_cast<uint64_t>(d);
  }
  const double out = static_cast<double>(x);
  return negative ? -out : out;
}

// sort()'s comparison of two values of one field under its type (Stage::SortType).
int CompareSortValues(const Value& a, const Value& b, Stage::SortType type) {
  switch (type) {
    case Stage::SortType::kNumber:
      return CompareValues(a, b);
    case Stage::SortType::kString: {
      const std::string sa = ValueToString(a), sb = ValueToString(b);
      return sa < sb ? -1 : (sa > sb ? 1 : 0);
    }
    case Stage::SortType::kHex: {
      const std::optional<double> ha = HexValue(a), hb = HexValue(b);
      if (ha && hb) return *ha < *hb ? -1 : (*ha > *hb ? 1 : 0);
      if (ha) return -1;  // hex numbers before other values, as numbers before text
      if (hb) return 1;
      const std::string sa = ValueToString(a), sb = ValueToString(b);
      return sa < sb ? -1 : (sa > sb ? 1 : 0);
    }
  }
  return 0;
}

// The order sort() gives two rows by the values of its fields (`keys`, one per field): < 0 when
// `a` comes first, > 0 when `b` does, 0 when the fields do not decide (the rows then keep their
// input order). A row lacking a field comes after one having it.
int CompareSortFields(const std::vector<std::optional<Value>>& a,
                      const std::vector<std::optional<Value>>& b,
                      const std::vector<Stage::SortKey>& keys) {
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::optional<Value>& va = a[i];
    const std::optional<Value>& vb = b[i];
    if (!va || !vb) {
      if (!va && !vb) continue;
      return vb == std::nullopt ? -1 : 1;
    }
    const int c = CompareSortValues(*va, *vb, keys[i].type);
    if (c != 0) return (keys[i].descending ? c > 0 : c < 0) ? -1 : 1;
  }
  return 0;
}

// The sort keys of a kSort stage, one per field (the stage's own, or its order and the numeric
// type for every field).
std::vector<Stage::SortKey> SortKeysOf(const Stage& st) {
  std::vector<Stage::SortKey> keys = st.sort_keys;
  if (keys.size() != st.fields.size()) {
    keys.assign(st.fields.size(), Stage::SortKey{st.descending, Stage::SortType::kNumber});
  }
  return keys;
}

size_t LimitOf(const Stage& st) { return static_cast<size_t>(std::max<int64_t>(st.limit, 0)); }

// sort()'s warning when it kept `cap` of `total` rows (none when it kept them all).
void SortLimitWarning(uint64_t total, size_t cap, std::vector<std::string>* warnings) {
  if (total > cap) {
    warnings->push_back("sort: kept the first " + std::to_string(cap) + " of " +
                        std::to_string(total) + " rows (limit=" + std::to_string(cap) + ")");
  }
}

// table(sortby=): keeps only `columns` of each row, in that order (nothing when empty).
void ProjectColumns(const std::vector<std::string>& columns, std::vector<Row>* rows) {
  if (columns.empty()) return;
  for (Row& row : *rows) {
    Row only;
    for (const std::string& f : columns) {
      if (const Value* v = RowGet(row, f)) only.emplace_back(f, *v);
    }
    row = std::move(only);
  }
}

class SortCollector final : public Collector {
 public:
  SortCollector(std::vector<std::string> fields, std::vector<Stage::SortKey> keys, size_t cap,
                std::vector<std::string> columns = {})
      : fields_(std::move(fields)),
        keys_(std::move(keys)),
        cap_(cap),
        columns_(std::move(columns)) {}

  void Add(const Record& r) override {
    ++total_;
    if (cap_ == 0) return;
    Entry e;
    e.key = r.key();
    e.vals.reserve(fields_.size());
    for (const std::string& f : fields_) e.vals.push_back(r.GetValue(f));
    if (entries_.size() >= cap_ && !Before(e, entries_.front())) return;
    if (columns_.empty()) {
      e.row = r.ToRow();
    } else {
      // table(sortby=): the columns, and the sort fields (read back from the row when decoded).
      for (const std::string& f : columns_) {
        if (std::optional<Value> v = r.GetValue(f)) e.row.emplace_back(f, std::move(*v));
      }
      for (const std::string& f : fields_) {
        if (RowGet(e.row, f) != nullptr) continue;
        if (std::optional<Value> v = r.GetValue(f)) e.row.emplace_back(f, std::move(*v));
      }
    }
    Push(std::move(e));
  }

  void Merge(Collector& other) override {
    auto* o = dynamic_cast<SortCollector*>(&other);
    if (o == nullptr) return;
    total_ += o->total_;
    for (Entry& e : o->entries_) {
      if (cap_ == 0) break;
      if (entries_.size() >= cap_ && !Before(e, entries_.front())) continue;
      Push(std::move(e));
    }
    o->entries_.clear();
    o->bytes_ = 0;
  }

  size_t MemoryBytes() const override { return bytes_; }

  void Encode(std::string* out) const override {
    PutHeader(out, StateTag::kSort);
    PutVarint64(out, total_);
    std::vector<const Entry*> sorted;
    sorted.reserve(entries_.size());
    for (const Entry& e : entries_) sorted.push_back(&e);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [this](const Entry* a, const Entry* b) { return Before(*a, *b); });
    PutKeyedRows(out, sorted);
  }

  Status Decode(std::string_view bytes) {
    Reader in(bytes);
    uint64_t n;
    if (!in.Header(StateTag::kSort) || !in.Varint(&total_) || !in.Count(&n, 5)) {
      return Malformed("truncated or malformed sort header");
    }
    if (n > cap_ || n > total_) return Malformed("sort state holds more rows than its limit");
    entries_.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Entry e;
      if (!in.Key(&e.key) || !in.GetRow(&e.row)) return Malformed("truncated or malformed row");
      e.vals.reserve(fields_.size());
      for (const std::string& f : fields_) {
        const Value* v = RowGet(e.row, f);
        e.vals.push_back(v ? std::optional<Value>(*v) : std::nullopt);
      }
      bytes_ += EntryBytes(e);
      entries_.push_back(std::move(e));
    }
    if (!in.done()) return Malformed("bytes after the last row");
    std::make_heap(entries_.begin(), entries_.end(), HeapLess());
    return Status::OK();
  }

  std::vector<Row> Finish(std::vector<std::string>* warnings) override {
    // stable_sort never reads out of bounds even if CompareValues is not transitive on mixed
    // numeric and text values.
    std::stable_sort(entries_.begin(), entries_.end(),
                     [this](const Entry& a, const Entry& b) { return Before(a, b); });
    SortLimitWarning(total_, cap_, warnings);
    bytes_ = 0;
    std::vector<Row> rows = TakeRows(&entries_);
    ProjectColumns(columns_, &rows);
    return rows;
  }

 private:
  struct Entry {
    std::vector<std::optional<Value>> vals;  // the sort fields' values
    RecordKey key;
    Row row;
  };

  // Output order: by the fields (rows lacking a field after those having it), then by key.
  bool Before(const Entry& a, const Entry& b) const {
    const int c = CompareSortFields(a.vals, b.vals, keys_);
    return c != 0 ? c < 0 : a.key < b.key;
  }
  // Max-heap by output order: the front is the last kept row.
  struct HeapCmp {
    const SortCollector* self;
    bool operator()(const Entry& a, const Entry& b) const { return self->Before(a, b); }
  };
  HeapCmp HeapLess() const { return HeapCmp{this}; }
  static size_t EntryBytes(const Entry& e) {
    size_t n = sizeof(Entry) + RowBytes(e.row) - sizeof(Row);
    for (const auto& v : e.vals) {
      n += sizeof(v);
      if (v) {
        if (const auto* s = std::get_if<std::string>(&*v)) n += s->size();
      }
    }
    return n;
  }
  void Push(Entry e) {
    PushBounded(std::move(e), cap_, HeapLess(), &EntryBytes, &entries_, &bytes_);
  }

  std::vector<std::string> fields_;
  std::vector<Stage::SortKey> keys_;  // one per field
  size_t cap_;
  std::vector<std::string> columns_;  // table(sortby=): the output columns (empty: whole rows)
  uint64_t total_ = 0;
  std::vector<Entry> entries_;
  size_t bytes_ = 0;
};

// =====================================================================================
// Aggregates: groups of metric states.
// =====================================================================================

// The state of one metric of one group.
struct Acc {
  // kSum/kAvg: sum of the integer values; kMin/kMax: the best value when it is an integer.
  __int128 isum = 0;
  // kSum/kAvg: sum of the non-integer values; kMin/kMax: the best value as a double.
  double dsum = 0;
  // kCount: records counted; kSum/kAvg/kMin/kMax: numeric values seen.
  int64_t n = 0;
  // Distinct count / percentile: index into the side table of value sets / value lists.
  uint32_t aux = 0;
  // kSum/kAvg: bit 0 = some value was not an integer. kMin/kMax: bit 0 = the best is an integer.
  uint8_t flags = 0;
};

struct MetricSpec {
  Metric::Kind kind = Metric::Kind::kCount;
  std::string field;
  bool distinct = false;                // kCount with a field
  std::vector<double> percentiles;      // kPercentile
  std::vector<std::string> names;       // output field(s)
  std::string separator;                // kCollect
  int64_t limit = 0;                    // kCollect
  std::vector<std::string> select;      // kSelectMax/kSelectMin/kSelectLast: the output fields
  std::shared_ptr<const Subquery> sub;  // kSubquery
  int64_t window_buckets = 0;           // window(): Metric::window_buckets / window_span_ms
  int64_t window_span_ms = 0;
  bool IsWindow() const { return window_buckets > 0 || window_span_ms > 0; }
  bool IsSubquery() const { return kind == Metric::Kind::kSubquery; }
  bool IsSelect() const {
    return kind == Metric::Kind::kSelectMax || kind == Metric::Kind::kSelectMin ||
           kind == Metric::Kind::kSelectLast;
  }
  bool IsDistinct() const { return kind == Metric::Kind::kCount && distinct && !field.empty(); }
  // The state is a set of distinct values (sets_): count(distinct=true), collect().
  bool UsesSet() const { return IsDistinct() || kind == Metric::Kind::kCollect; }
  // The state is the list of numeric values (pvals_): percentile(), stdDev(), range().
  bool UsesValues() const {
    return kind == Metric::Kind::kPercentile || kind == Metric::Kind::kStdDev ||
           kind == Metric::Kind::kRange;
  }
};

// Wire codes of groupings and metric kinds (WIRE.md), independent of the enums' order.
uint8_t WireGrouping(Stage::Grouping g) {
  switch (g) {
    case Stage::Grouping::kNone:
      return 0;
    case Stage::Grouping::kGroupBy:
      return 1;
    case Stage::Grouping::kBucket:
      return 2;
    case Stage::Grouping::kTop:
      return 3;
  }
  return 255;
}
uint8_t WireKind(Metric::Kind k) {
  switch (k) {
    case Metric::Kind::kCount:
      return 0;
    case Metric::Kind::kSum:
      return 1;
    case Metric::Kind::kAvg:
      return 2;
    case Metric::Kind::kMin:
      return 3;
    case Metric::Kind::kMax:
      return 4;
    case Metric::Kind::kPercentile:
      return 5;
    case Metric::Kind::kStdDev:
      return 6;
    case Metric::Kind::kRange:
      return 7;
    case Metric::Kind::kCollect:
      return 8;
    case Metric::Kind::kSelectMax:
      return 9;
    case Metric::Kind::kSelectMin:
      return 10;
    case Metric::Kind::kSelectLast:
      return 11;
    case Metric::Kind::kSubquery:
      return 12;
  }
  return 255;
}

std::string DefaultName(Metric::Kind k) {
  switch (k) {
    case Metric::Kind::kCount:
      return "_count";
    case Metric::Kind::kSum:
      return "_sum";
    case Metric::Kind::kAvg:
      return "_avg";
    case Metric::Kind::kMin:
      return "_min";
    case Metric::Kind::kMax:
      return "_max";
    case Metric::Kind::kStdDev:
      return "_stddev";
    case Metric::Kind::kRange:
      return "_range";
    case Metric::Kind::kPercentile:
    case Metric::Kind::kCollect:
    case Metric::Kind::kSelectMax:
    case Metric::Kind::kSelectMin:
    case Metric::Kind::kSelectLast:
    case Metric::Kind::kSubquery:
      return "";
  }
  return "";
}

MetricSpec SpecOf(const Metric& m) {
  MetricSpec s;
  s.kind = m.kind;
  s.field = m.field;
  s.distinct = m.distinct;
  s.window_buckets = m.window_buckets;
  s.window_span_ms = m.window_span_ms;
  if (m.kind == Metric::Kind::kPercentile) {
    s.percentiles = m.percentiles;
    if (s.percentiles.empty()) s.percentiles = {50, 75, 99};
    for (double p : s.percentiles) s.names.push_back(m.as + "_" + FormatPercentile(p));
  } else if (m.kind == Metric::Kind::kSelectMax || m.kind == Metric::Kind::kSelectMin ||
             m.kind == Metric::Kind::kSelectLast) {
    s.select = m.select_fields;
    s.names = m.select_fields;
  } else if (m.kind == Metric::Kind::kSubquery) {
    s.sub = m.subquery;
  } else if (m.kind == Metric::Kind::kCollect) {
    s.names.push_back(m.as.empty() ? m.field : m.as);
    s.separator = m.separator;
    s.limit = m.limit;
  } else {
    s.names.push_back(m.as.empty() ? DefaultName(m.kind) : m.as);
  }
  return s;
}

// Sets `name` in `row` (replacing an earlier column of that name).
void SetColumn(Row* row, const std::string& name, Value v) {
  for (auto& [k, old] : *row) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  row->emplace_back(name, std::move(v));
}

Value SumValue(__int128 isum, double dsum, bool any_double) {
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  constexpr __int128 kMin = std::numeric_limits<int64_t>::min();
  if (!any_double && isum >= kMin && isum <= kMax) return Value(static_cast<int64_t>(isum));
  return Value(static_cast<double>(isum) + dsum);
}

// Numeric order of two numeric Values (int64 or double), NaN lowest.
int CompareNumeric(const Value& a, const Value& b) {
  const auto* ia = std::get_if<int64_t>(&a);
  const auto* ib = std::get_if<int64_t>(&b);
  if (ia && ib) return *ia < *ib ? -1 : (*ia > *ib ? 1 : 0);
  double x = ia ? static_cast<double>(*ia) : std::get<double>(a);
  double y = ib ? static_cast<double>(*ib) : std::get<double>(b);
  if (std::isnan(x)) x = -std::numeric_limits<double>::infinity();
  if (std::isnan(y)) y = -std::numeric_limits<double>::infinity();
  return x < y ? -1 : (x > y ? 1 : 0);
}

// Sorts `order` (indexes into `keys`, whose strings are pairwise distinct) by key, comparing
// bytes unsigned. Most-significant-digit first, eight bytes at a time: each pass sorts by the
// next eight bytes as an integer, and only runs that agree on them go on to the next eight, so
// keys with long common prefixes (URLs, paths) are not compared from their start again and again.
void SortDistinct(const std::vector<std::string_view>& keys, std::vector<uint32_t>* order) {
  struct Item {
    uint64_t chunk;  // bytes [depth, depth + 8) big-endian, zero-padded
    uint32_t more;   // bytes left from depth, capped at 9 (9: more than this chunk)
    uint32_t g;
  };
  std::vector<Item> items(order->size());
  for (size_t i = 0; i < items.size(); ++i) items[i].g = (*order)[i];
  struct Range {
    size_t lo, hi, depth;
  };
  std::vector<Range> todo{{0, items.size(), 0}};
  while (!todo.empty()) {
    const Range r = todo.back();
    todo.pop_back();
    for (size_t i = r.lo; i < r.hi; ++i) {
      const std::string_view k = keys[items[i].g];
      const size_t left = k.size() > r.depth ? k.size() - r.depth : 0;
      uint64_t v = 0;
      for (size_t b = 0; b < 8; ++b) {
        v = (v << 8) | (b < left ? static_cast<uint8_t>(k[r.depth + b]) : 0);
      }
      items[i].chunk = v;
      items[i].more = static_cast<uint32_t>(std::min<size_t>(left, 9));
    }
    std::sort(items.begin() + static_cast<ptrdiff_t>(r.lo),
              items.begin() + static_cast<ptrdiff_t>(r.hi), [](const Item& a, const Item& b) {
                return a.chunk != b.chunk ? a.chunk < b.chunk : a.more < b.more;
              });
    // Runs that agree on these eight bytes and go on: order by what follows.
    for (size_t i = r.lo; i < r.hi;) {
      size_t j = i + 1;
      while (j < r.hi && items[j].chunk == items[i].chunk && items[j].more == items[i].more) ++j;
      if (j - i > 1 && items[i].more > 8) todo.push_back(Range{i, j, r.depth + 8});
      i = j;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) (*order)[i] = items[i].g;
}

bool PartsLess(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

// The state of selectFromMax/selectFromMin (the chosen record's ordering value, key and included
// fields) or selectLast (per output field, its newest value and the key of its record).
struct Selected {
  bool has = false;
  Num best;
  RecordKey key;
  Row row;
  std::vector<std::optional<std::pair<RecordKey, Value>>> last;
};

// Whether a record with value `x` and key `k` replaces `cur` for selectFromMax (max) or
// selectFromMin: a better value, or an equal one with a larger (max) / smaller (min) key, so that
// the choice does not depend on the order of the input.
bool SelectBeats(const Num& x, const RecordKey& k, const Selected& cur, bool max) {
  if (!cur.has) return true;
  const int c = CompareNum(x, cur.best);
  if (c != 0) return max ? c > 0 : c < 0;
  return max ? k > cur.key : k < cur.key;
}

// Runs the per-record stages [begin, end) of `stages` over `r` and hands each output record to
// `sink` (a subquery's stages before its collecting stage).
template <typename Sink>
void RunRecordStages(const std::vector<Stage>& stages, size_t begin, size_t end, Record&& r,
                     Sink&& sink) {
  for (size_t s = begin; s < end; ++s) {
    if (EmitsOneOrNone(stages[s])) {
      if (!ApplyTransformInPlace(stages[s], r)) return;
      continue;
    }
    std::vector<Record> out;
    ApplyTransform(stages[s], std::move(r), &out);
    for (Record& o : out) RunRecordStages(stages, s + 1, end, std::move(o), sink);
    return;
  }
  sink(r);
}

// Runs stages [begin, stages.size()) over rows: per-record stages row by row, a collecting stage
// over all of its input (a subquery's stages after its first collecting stage).
std::vector<Row> RunRowPipeline(const std::vector<Stage>& stages, size_t begin,
                                std::vector<Row> rows, const CollectorContext& ctx,
                                std::vector<std::string>* warnings) {
  for (size_t s = begin; s < stages.size(); ++s) {
    std::vector<Row> out;
    std::unique_ptr<Collector> c;
    if (!stages[s].IsTransform()) c = NewCollector(stages[s], ctx);
    for (size_t i = 0; i < rows.size(); ++i) {
      RecordKey key;
      key.offset = static_cast<int64_t>(i);
      Record rec = Record::FromRow(std::move(rows[i]), key);
      if (c) {
        c->Add(rec);
        continue;
      }
      RunRecordStages(stages, s, s + 1, std::move(rec),
                      [&out](const Record& r) { out.push_back(r.ToRow()); });
    }
    rows = c ? c->Finish(warnings) : std::move(out);
  }
  return rows;
}

class AggregateCollector final : public Collector {
 public:
  AggregateCollector(const Stage& st, const CollectorContext& ctx)
      : grouping_(st.grouping),
        fields_(st.fields),
        limit_(std::max<int64_t>(st.limit, 0)),
        function_(st.function),
        range_(ctx.range),
        ctx_(ctx),
        top_percent_(st.top_percent),
        top_rest_(st.top_rest),
        units_(st.units) {
    if (grouping_ == Stage::Grouping::kTop) {
      Metric m;
      if (st.top_sum.empty()) {
        m.kind = Metric::Kind::kCount;
      } else {
        m.kind = Metric::Kind::kSum;
        m.field = st.top_sum;
      }
      if (!st.metrics.empty()) m.as = st.metrics[0].as;
      metrics_.push_back(SpecOf(m));
    } else {
      for (const Metric& m : st.metrics) metrics_.push_back(SpecOf(m));
    }
    if (grouping_ == Stage::Grouping::kBucket) {
      if (st.span_ms > 0) {
        span_ = st.span_ms;
      } else {
        span_ = st.buckets > 0 ? BucketsSpan(ctx.range, st.buckets) : AutoSpan(ctx.range);
        span_ = std::max(span_, st.min_span_ms);
      }
      if (function_.empty()) function_ = "timeChart";
    }
    if (function_.empty()) function_ = grouping_ == Stage::Grouping::kTop ? "top" : "groupBy";
    has_subquery_ = std::any_of(metrics_.begin(), metrics_.end(),
                                [](const MetricSpec& m) { return m.IsSubquery(); });
    if (grouping_ == Stage::Grouping::kNone) FindOrAdd("");
    counts_only_ = true;
    for (const MetricSpec& m : metrics_) {
      if (m.kind != Metric::Kind::kCount || !m.field.empty()) counts_only_ = false;
    }
  }

  bool AddCount(uint64_t n) override {
    if (!counts_only_ || grouping_ != Stage::Grouping::kNone) return false;
    AddCounts(0, n);
    return true;
  }

  std::string ContributingField() const override {
    if (!counts_only_ || fields_.size() != 1 || !IsEventField(fields_[0])) return {};
    if (grouping_ != Stage::Grouping::kGroupBy && grouping_ != Stage::Grouping::kTop) return {};
    return fields_[0];
  }

  std::string CountsByField() const override {
    if (!counts_only_ || fields_.size() != 1) return {};
    if (grouping_ != Stage::Grouping::kGroupBy && grouping_ != Stage::Grouping::kTop) return {};
    return fields_[0];
  }

  void AddKeyCount(std::string_view key, uint64_t n) override { AddCounts(FindOrAdd(key), n); }

  bool AddBlock(const DecodedBlock& b, const std::vector<uint8_t>& matched) override {
    if (!counts_only_) return false;
    const size_t n = b.size();
    switch (grouping_) {
      case Stage::Grouping::kNone: {
        uint64_t k = 0;
        for (size_t i = 0; i < n; ++i) k += matched[i] != 0;
        AddCounts(0, k);
        return true;
      }
      case Stage::Grouping::kGroupBy:
      case Stage::Grouping::kTop: {
        if (fields_.size() != 1) return false;
        // No event of the block has the field: none joins a group.
        if (b.field_names_complete && IsEventField(fields_[0]) && !b.HasFieldName(fields_[0])) {
          return true;
        }
        const DecodedBlock::DictColumn* d = b.FindDictColumn(fields_[0]);
        if (d == nullptr) return false;
        std::vector<uint64_t>& counts = dict_counts_;
        counts.assign(d->values.size(), 0);
        for (size_t i = 0; i < n; ++i) {
          const uint32_t id = d->ids[i];
          if (matched[i] && id != DecodedBlock::kNoValue) ++counts[id];
        }
        for (size_t id = 0; id < counts.size(); ++id) {
          if (counts[id] != 0) AddCounts(FindOrAdd(d->values[id]), counts[id]);
        }
        return true;
      }
      case Stage::Grouping::kBucket: {
        if (!fields_.empty()) return false;
        // Events of a block are mostly in time order: one bucket lookup per run.
        int64_t lo = 0, hi = -1;  // the current bucket [lo, hi], empty at first
        uint32_t g = 0;
        uint64_t run = 0;
        for (size_t i = 0; i < n; ++i) {
          if (!matched[i]) continue;
          const int64_t t = b.timestamps[i];
          if (t >= lo && t <= hi) {
            ++run;
            continue;
          }
          if (run != 0) AddCounts(g, run);
          run = 0;
          std::optional<int64_t> start = FloorTo(t, span_);
          if (!start) {
            lo = 0;
            hi = -1;
            continue;
          }
          key_buf_.clear();
          PutFixed64(&key_buf_, static_cast<uint64_t>(*start));
          g = FindOrAdd(key_buf_);
          lo = *start;
          hi = *start > std::numeric_limits<int64_t>::max() - (span_ - 1)
                   ? std::numeric_limits<int64_t>::max()
                   : *start + (span_ - 1);
          run = 1;
        }
        if (run != 0) AddCounts(g, run);
        return true;
      }
    }
    return false;
  }

  void Add(const Record& r) override {
    uint32_t g = 0;
    if (grouping_ != Stage::Grouping::kNone) {
      std::string_view key;
      if (grouping_ == Stage::Grouping::kBucket) {
        std::optional<Value> ts = r.GetValue("@timestamp");
        if (!ts) return;
        int64_t t;
        if (const auto* i = std::get_if<int64_t>(&*ts)) {
          t = *i;
        } else {
          std::optional<double> d = ValueToNumber(*ts);
          if (!d || !(std::fabs(*d) < 9.0e18)) return;
          t = static_cast<int64_t>(std::floor(*d));
        }
        std::optional<int64_t> start = FloorTo(t, span_);
        if (!start) return;
        key_buf_.clear();
        PutFixed64(&key_buf_, static_cast<uint64_t>(*start));
        if (!AppendFields(r, &key_buf_)) return;
        key = key_buf_;
      } else if (fields_.size() == 1) {
        std::optional<std::string_view> v = r.Get(fields_[0], &scratch_);
        if (!v) return;
        key = *v;
      } else {
        key_buf_.clear();
        if (!AppendFields(r, &key_buf_)) return;
        key = key_buf_;
      }
      g = FindOrAdd(key);
    }
    AddMetrics(g, r);
  }

  void Merge(Collector& other) override {
    auto* o = dynamic_cast<AggregateCollector*>(&other);
    if (o == nullptr || o->metrics_.size() != metrics_.size()) return;
    for (uint32_t og = 0; og < o->keys_.size(); ++og) {
      const uint32_t g = FindOrAdd(o->keys_[og]);
      MergeGroup(g, o, og);
    }
  }

  size_t MemoryBytes() const override { return bytes_; }

  void Encode(std::string* out) const override;
  Status Decode(std::string_view bytes);
  std::vector<Row> Finish(std::vector<std::string>* warnings) override;

 private:
  size_t stride() const { return metrics_.size(); }
  Acc* AccsOf(uint32_t g) { return accs_.data() + static_cast<size_t>(g) * stride(); }
  const Acc* AccsOf(uint32_t g) const { return accs_.data() + static_cast<size_t>(g) * stride(); }

  // The key parts of the group fields (a single field of a non-bucket stage is the key itself).
  bool AppendFields(const Record& r, std::string* key) {
    for (const std::string& f : fields_) {
      std::optional<std::string_view> v = r.Get(f, &scratch_);
      if (!v) return false;
      AppendPart(key, *v);
    }
    return true;
  }
  bool SplitGroupKey(std::string_view key, std::vector<std::string_view>* parts) const {
    if (grouping_ == Stage::Grouping::kBucket) {
      if (key.size() < 8) return false;
      key.remove_prefix(8);
      return SplitParts(key, fields_.size(), parts);
    }
    if (grouping_ == Stage::Grouping::kNone) {
      parts->clear();
      return key.empty();
    }
    if (fields_.size() == 1) {
      parts->assign(1, key);
      return true;
    }
    return SplitParts(key, fields_.size(), parts);
  }
  static int64_t BucketOf(std::string_view key) {
    return static_cast<int64_t>(DecodeFixed64(key.data()));
  }

  uint32_t FindOrAdd(std::string_view key) {
    const uint64_t h = GroupIndex::Hash(key);
    const uint32_t found = index_.Find(key, h, keys_);
    if (found != GroupIndex::kAbsent) return found;
    const uint32_t g = static_cast<uint32_t>(keys_.size());
    keys_.emplace_back(key);
    const size_t slot_bytes = index_.SlotBytes();
    index_.Insert(h, g);
    bytes_ += index_.SlotBytes() - slot_bytes;
    accs_.resize(accs_.size() + stride());
    Acc* a = AccsOf(g);
    for (size_t m = 0; m < stride(); ++m) {
      if (metrics_[m].UsesSet()) {
        a[m].aux = static_cast<uint32_t>(sets_.size());
        sets_.emplace_back();
      } else if (metrics_[m].IsSelect()) {
        a[m].aux = static_cast<uint32_t>(sels_.size());
        sels_.emplace_back();
        if (metrics_[m].kind == Metric::Kind::kSelectLast) {
          sels_.back().last.resize(metrics_[m].select.size());
        }
      } else if (metrics_[m].UsesValues()) {
        a[m].aux = static_cast<uint32_t>(pvals_.size());
        pvals_.emplace_back();
      } else if (metrics_[m].IsSubquery()) {
        a[m].aux = static_cast<uint32_t>(subs_.size());
        subs_.push_back(NewSubCollector(metrics_[m]));
        bytes_ += subs_.back()->MemoryBytes();
      }
    }
    bytes_ += key.size() + sizeof(std::string) + stride() * sizeof(Acc);
    return g;
  }

  // Adds `k` to every (plain count) metric of group g.
  void AddCounts(uint32_t g, uint64_t k) {
    Acc* a = AccsOf(g);
    for (size_t m = 0; m < stride(); ++m) a[m].n += static_cast<int64_t>(k);
  }

  void AddDistinct(Acc& a, std::string_view v) {
    StringSet& set = sets_[a.aux];
    if (set.find(v) != set.end()) return;
    set.emplace(v);
    bytes_ += v.size() + 48;
  }

  static void AddSum(Acc& a, const Num& x) {
    if (x.is_int) {
      a.isum += x.i;
    } else {
      a.dsum += x.d;
      a.flags |= 1;
    }
    ++a.n;
  }
  static void AddBest(Acc& a, const Num& x, bool max) {
    Num cur{(a.flags & 1) != 0, static_cast<int64_t>(a.isum), a.dsum};
    if (a.n == 0 || (max ? CompareNum(x, cur) > 0 : CompareNum(x, cur) < 0)) {
      a.isum = x.i;
      a.dsum = x.d;
      a.flags = x.is_int ? 1 : 0;
    }
    ++a.n;
  }

  void AddMetrics(uint32_t g, const Record& r) {
    Acc* a = AccsOf(g);
    for (size_t m = 0; m < stride(); ++m) {
      const MetricSpec& spec = metrics_[m];
      if (spec.kind == Metric::Kind::kCount && spec.field.empty()) {
        ++a[m].n;
        continue;
      }
      if (spec.IsSelect()) {
        AddSelected(spec, sels_[a[m].aux], r);
        continue;
      }
      if (spec.IsSubquery()) {
        Collector& c = *subs_[a[m].aux];
        const size_t before = c.MemoryBytes();
        const Subquery& sq = *spec.sub;
        if (sq.collect == 0) {
          c.Add(r);
        } else {
          Record copy = r;
          RunRecordStages(sq.stages, 0, sq.collect, std::move(copy),
                          [&c](const Record& out) { c.Add(out); });
        }
        bytes_ += c.MemoryBytes() - before;
        continue;
      }
      std::optional<std::string_view> v = r.Get(spec.field, &scratch2_);
      if (!v) continue;
      if (spec.kind == Metric::Kind::kCount) {
        if (spec.IsDistinct()) {
          AddDistinct(a[m], *v);
        } else {
          ++a[m].n;
        }
        continue;
      }
      if (spec.kind == Metric::Kind::kCollect) {
        AddDistinct(a[m], *v);
        continue;
      }
      Num x;
      if (!ParseNum(*v, &x)) continue;
      switch (spec.kind) {
        case Metric::Kind::kSum:
        case Metric::Kind::kAvg:
          AddSum(a[m], x);
          break;
        case Metric::Kind::kMin:
          AddBest(a[m], x, false);
          break;
        case Metric::Kind::kMax:
          AddBest(a[m], x, true);
          break;
        case Metric::Kind::kPercentile:
        case Metric::Kind::kStdDev:
        case Metric::Kind::kRange:
          pvals_[a[m].aux].push_back(x.is_int ? static_cast<double>(x.i) : x.d);
          ++a[m].n;
          bytes_ += sizeof(double);
          break;
        case Metric::Kind::kCount:
        case Metric::Kind::kCollect:
        case Metric::Kind::kSelectMax:
        case Metric::Kind::kSelectMin:
        case Metric::Kind::kSelectLast:
        case Metric::Kind::kSubquery:
          break;
      }
    }
  }

  void AddSelected(const MetricSpec& spec, Selected& sel, const Record& r) {
    if (spec.kind == Metric::Kind::kSelectLast) {
      for (size_t k = 0; k < spec.select.size(); ++k) {
        if (sel.last[k] && !(r.key() > sel.last[k]->first)) continue;
        std::optional<Value> v = r.GetValue(spec.select[k]);
        if (!v) continue;
        const size_t old = sel.last[k] ? RowBytes(Row{{spec.select[k], sel.last[k]->second}}) : 0;
        sel.last[k].emplace(r.key(), std::move(*v));
        bytes_ += RowBytes(Row{{spec.select[k], sel.last[k]->second}}) - old;
      }
      return;
    }
    std::optional<std::string_view> v = r.Get(spec.field, &scratch2_);
    Num x;
    if (!v || !ParseNum(*v, &x)) return;
    if (!SelectBeats(x, r.key(), sel, spec.kind == Metric::Kind::kSelectMax)) return;
    const size_t old = sel.has ? RowBytes(sel.row) : 0;
    sel.has = true;
    sel.best = x;
    sel.key = r.key();
    sel.row.clear();
    for (const std::string& f : spec.select) {
      if (std::optional<Value> fv = r.GetValue(f)) sel.row.emplace_back(f, std::move(*fv));
    }
    bytes_ += RowBytes(sel.row) - old;
  }

  // Folds `src` into `dst` (both states of metric `spec`).
  static void MergeSelected(const MetricSpec& spec, Selected& dst, Selected&& src) {
    if (spec.kind == Metric::Kind::kSelectLast) {
      for (size_t k = 0; k < dst.last.size() && k < src.last.size(); ++k) {
        if (src.last[k] && (!dst.last[k] || src.last[k]->first > dst.last[k]->first)) {
          dst.last[k] = std::move(src.last[k]);
        }
      }
      return;
    }
    if (src.has && SelectBeats(src.best, src.key, dst, spec.kind == Metric::Kind::kSelectMax)) {
      dst = std::move(src);
    }
  }

  void MergeGroup(uint32_t g, AggregateCollector* o, uint32_t og) {
    Acc* a = AccsOf(g);
    Acc* b = o->AccsOf(og);
    for (size_t m = 0; m < stride(); ++m) {
      const MetricSpec& spec = metrics_[m];
      if (spec.UsesSet()) {
        StringSet& src = o->sets_[b[m].aux];
        StringSet& dst = sets_[a[m].aux];
        size_t moved = 0;
        for (const std::string& s : src) moved += s.size() + 48;
        dst.merge(src);
        for (const std::string& s : src) moved -= s.size() + 48;  // duplicates stay in src
        bytes_ += moved;
        continue;
      }
      if (spec.IsSelect()) {
        const size_t before = SelectedBytes(sels_[a[m].aux]);
        MergeSelected(spec, sels_[a[m].aux], std::move(o->sels_[b[m].aux]));
        bytes_ += SelectedBytes(sels_[a[m].aux]) - before;
        continue;
      }
      if (spec.IsSubquery()) {
        Collector& c = *subs_[a[m].aux];
        const size_t before = c.MemoryBytes();
        c.Merge(*o->subs_[b[m].aux]);
        bytes_ += c.MemoryBytes() - before;
        continue;
      }
      switch (spec.kind) {
        case Metric::Kind::kCount:
          a[m].n += b[m].n;
          break;
        case Metric::Kind::kSum:
        case Metric::Kind::kAvg:
          a[m].isum += b[m].isum;
          a[m].dsum += b[m].dsum;
          a[m].flags |= b[m].flags;
          a[m].n += b[m].n;
          break;
        case Metric::Kind::kMin:
        case Metric::Kind::kMax:
          if (b[m].n > 0) {
            const int64_t n = a[m].n;
            AddBest(a[m], Num{(b[m].flags & 1) != 0, static_cast<int64_t>(b[m].isum), b[m].dsum},
                    spec.kind == Metric::Kind::kMax);
            a[m].n = n + b[m].n;
          }
          break;
        case Metric::Kind::kCollect:
        case Metric::Kind::kSelectMax:
        case Metric::Kind::kSelectMin:
        case Metric::Kind::kSelectLast:
        case Metric::Kind::kSubquery:
          break;  // merged above
        case Metric::Kind::kPercentile:
        case Metric::Kind::kStdDev:
        case Metric::Kind::kRange: {
          std::vector<double>& dst = pvals_[a[m].aux];
          std::vector<double>& src = o->pvals_[b[m].aux];
          dst.insert(dst.end(), src.begin(), src.end());
          bytes_ += src.size() * sizeof(double);
          a[m].n += b[m].n;
          src.clear();
          break;
        }
      }
    }
  }

  // Appends the metric columns of the union of `groups` (none: an empty group) to `row`; the
  // window() metrics over `window` instead (null: none of them).
  void AppendMetrics(const std::vector<uint32_t>& bucket_groups, Row* row,
                     const std::vector<uint32_t>* window = nullptr) {
    for (size_t m = 0; m < stride(); ++m) {
      const MetricSpec& spec = metrics_[m];
      if (spec.IsSubquery()) continue;  // EmitRows
      if (spec.IsWindow() && window == nullptr && grouping_ == Stage::Grouping::kBucket) continue;
      const std::vector<uint32_t>& groups =
          spec.IsWindow() && window != nullptr ? *window : bucket_groups;
      if (spec.IsDistinct()) {
        int64_t count = 0;
        if (groups.size() == 1) {
          count = static_cast<int64_t>(sets_[AccsOf(groups[0])[m].aux].size());
        } else if (!groups.empty()) {
          std::unordered_set<std::string_view> all;
          for (uint32_t g : groups) {
            for (const std::string& s : sets_[AccsOf(g)[m].aux]) all.insert(s);
          }
          count = static_cast<int64_t>(all.size());
        }
        SetColumn(row, spec.names[0], Value(count));
        continue;
      }
      if (spec.kind == Metric::Kind::kCollect) {
        AppendCollected(spec, m, groups, row);
        continue;
      }
      if (spec.IsSelect()) {
        Selected best;
        best.last.resize(spec.kind == Metric::Kind::kSelectLast ? spec.select.size() : 0);
        for (uint32_t g : groups) {
          Selected copy = sels_[AccsOf(g)[m].aux];
          MergeSelected(spec, best, std::move(copy));
        }
        if (spec.kind == Metric::Kind::kSelectLast) {
          for (size_t k = 0; k < spec.select.size(); ++k) {
            if (best.last[k]) SetColumn(row, spec.select[k], best.last[k]->second);
          }
        } else if (best.has) {
          for (auto& [f, v] : best.row) SetColumn(row, f, v);
        }
        continue;
      }
      Acc sum;
      std::vector<double> merged;
      std::vector<double>* vals = &merged;
      for (uint32_t g : groups) {
        const Acc& a = AccsOf(g)[m];
        switch (spec.kind) {
          case Metric::Kind::kCount:
            sum.n += a.n;
            break;
          case Metric::Kind::kSum:
          case Metric::Kind::kAvg:
            sum.isum += a.isum;
            sum.dsum += a.dsum;
            sum.flags |= a.flags;
            sum.n += a.n;
            break;
          case Metric::Kind::kMin:
          case Metric::Kind::kMax:
            if (a.n > 0) {
              const int64_t n = sum.n;
              AddBest(sum, Num{(a.flags & 1) != 0, static_cast<int64_t>(a.isum), a.dsum},
                      spec.kind == Metric::Kind::kMax);
              sum.n = n + a.n;
            }
            break;
          case Metric::Kind::kCollect:
          case Metric::Kind::kSelectMax:
          case Metric::Kind::kSelectMin:
          case Metric::Kind::kSelectLast:
          case Metric::Kind::kSubquery:
            break;
          case Metric::Kind::kPercentile:
          case Metric::Kind::kStdDev:
          case Metric::Kind::kRange:
            if (groups.size() == 1) {
              vals = &pvals_[a.aux];
            } else {
              merged.insert(merged.end(), pvals_[a.aux].begin(), pvals_[a.aux].end());
            }
            sum.n += a.n;
            break;
        }
      }
      switch (spec.kind) {
        case Metric::Kind::kCount:
          SetColumn(row, spec.names[0], Value(sum.n));
          break;
        case Metric::Kind::kSum:
          if (sum.n > 0) SetColumn(row, spec.names[0], SumValue(sum.isum, sum.dsum, sum.flags & 1));
          break;
        case Metric::Kind::kAvg:
          if (sum.n > 0) {
            const double total = static_cast<double>(sum.isum) + sum.dsum;
            SetColumn(row, spec.names[0], Value(total / static_cast<double>(sum.n)));
          }
          break;
        case Metric::Kind::kMin:
        case Metric::Kind::kMax:
          if (sum.n > 0) {
            SetColumn(row, spec.names[0],
                      (sum.flags & 1) ? Value(static_cast<int64_t>(sum.isum)) : Value(sum.dsum));
          }
          break;
        case Metric::Kind::kPercentile:
          if (!vals->empty()) {
            std::sort(vals->begin(), vals->end());
            const double n = static_cast<double>(vals->size());
            for (size_t p = 0; p < spec.percentiles.size(); ++p) {
              // Nearest rank: the smallest value with at least p% of the values at or below it.
              const double rank = std::ceil(spec.percentiles[p] * n / 100.0 - 1e-9);
              const size_t idx = rank <= 1   ? 0
                                 : rank >= n ? vals->size() - 1
                                             : static_cast<size_t>(rank) - 1;
              SetColumn(row, spec.names[p], Value((*vals)[idx]));
            }
          }
          break;
        case Metric::Kind::kStdDev:
          if (!vals->empty()) {
            // Population standard deviation, two passes for accuracy, over the values in
            // ascending order: the sums, and so the answer, do not depend on the order in which
            // blocks, workers and nodes delivered them.
            std::vector<double> sorted(*vals);
            std::sort(sorted.begin(), sorted.end());
            const double n = static_cast<double>(sorted.size());
            double mean = 0;
            for (double v : sorted) mean += v;
            mean /= n;
            double sq = 0;
            for (double v : sorted) sq += (v - mean) * (v - mean);
            SetColumn(row, spec.names[0], Value(std::sqrt(sq / n)));
          }
          break;
        case Metric::Kind::kRange:
          if (!vals->empty()) {
            auto [lo, hi] = std::minmax_element(vals->begin(), vals->end());
            const double r = *hi - *lo;
            SetColumn(row, spec.names[0],
                      FitsInt64Exactly(r) ? Value(static_cast<int64_t>(r)) : Value(r));
          }
          break;
        case Metric::Kind::kCollect:
        case Metric::Kind::kSelectMax:
        case Metric::Kind::kSelectMin:
        case Metric::Kind::kSelectLast:
        case Metric::Kind::kSubquery:
          break;
      }
    }
  }

  // A fresh state of subquery metric `spec`.
  std::unique_ptr<Collector> NewSubCollector(const MetricSpec& spec) const {
    return NewCollector(spec.sub->stages[spec.sub->collect], ctx_);
  }

  // The output rows of subquery metric m over the union of `groups` (none: an empty group): its
  // collecting stage's rows (from copies: the states stay), through its later stages.
  std::vector<Row> SubqueryRows(size_t m, const std::vector<uint32_t>& groups) {
    const MetricSpec& spec = metrics_[m];
    const Subquery& sq = *spec.sub;
    std::unique_ptr<Collector> all = NewSubCollector(spec);
    for (uint32_t g : groups) {
      std::string state;
      subs_[AccsOf(g)[m].aux]->Encode(&state);
      auto copy = DecodeCollector(&sq.stages[sq.collect], ctx_, state);
      if (copy.ok()) all->Merge(**copy);
    }
    std::vector<Row> rows = all->Finish(&sub_warnings_);
    return RunRowPipeline(sq.stages, sq.collect + 1, std::move(rows), ctx_, &sub_warnings_);
  }

  // `row` (group columns) with the metrics of the union of `groups` appended to *out: once, or,
  // with subquery metrics, once per combination of their rows (a subquery without rows gives
  // none), each subquery row's columns set over the row's.
  void EmitRows(const std::vector<uint32_t>& groups, Row row, std::vector<Row>* out,
                const std::vector<uint32_t>* window = nullptr) {
    AppendMetrics(groups, &row, window);
    if (!has_subquery_) {
      out->push_back(std::move(row));  // no subquery metric (the common case)
      return;
    }
    std::vector<Row> acc;
    acc.push_back(std::move(row));
    for (size_t m = 0; m < stride(); ++m) {
      if (!metrics_[m].IsSubquery()) continue;
      std::vector<Row> sub = SubqueryRows(m, groups);
      std::vector<Row> next;
      next.reserve(acc.size() * sub.size());
      for (const Row& a : acc) {
        for (const Row& b : sub) {
          Row r = a;
          for (const auto& [name, v] : b) SetColumn(&r, name, v);
          next.push_back(std::move(r));
        }
      }
      acc = std::move(next);
    }
    for (Row& r : acc) out->push_back(std::move(r));
  }

  // collect(): the distinct values of metric m over `groups`, in ascending byte order, the first
  // spec.limit of them joined by spec.separator (nothing when there are none).
  void AppendCollected(const MetricSpec& spec, size_t m, const std::vector<uint32_t>& groups,
                       Row* row) {
    std::vector<std::string_view> all;
    for (uint32_t g : groups) {
      for (const std::string& v : sets_[AccsOf(g)[m].aux]) all.push_back(v);
    }
    if (all.empty()) return;
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    if (spec.limit > 0 && all.size() > static_cast<size_t>(spec.limit)) all.resize(spec.limit);
    std::string out;
    for (size_t k = 0; k < all.size(); ++k) {
      if (k > 0) out += spec.separator;
      out += all[k];
    }
    SetColumn(row, spec.names[0], Value(std::move(out)));
  }
  static bool FitsInt64Exactly(double d) {
    return std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9007199254740992.0;
  }

  std::optional<std::vector<Row>> FinishThrough(const Stage& next,
                                                std::vector<std::string>* warnings) override;
  std::vector<Row> FinishGroupBy(std::vector<std::string>* warnings);
  std::vector<Row> FinishBucket(std::vector<std::string>* warnings);
  std::vector<Row> FinishTop();
  // timeChart(unit=): scales the metric columns of `rows`.
  void ApplyUnits(std::vector<Row>* rows) const;

  // Stage.
  Stage::Grouping grouping_;
  std::vector<std::string> fields_;
  int64_t limit_;
  bool counts_only_ = false;  // every metric is count() without a field
  std::vector<uint64_t> dict_counts_;
  std::string function_;
  TimeRange range_;
  CollectorContext ctx_;
  bool top_percent_;
  std::string top_rest_;                      // top(rest=)
  std::vector<Stage::UnitConversion> units_;  // timeChart(unit=)
  std::vector<MetricSpec> metrics_;
  int64_t span_ = 0;  // kBucket

  // State: group g has key keys_[g] and metric states accs_[g * stride() ...].
  GroupIndex index_;
  std::vector<std::string> keys_;
  std::vector<Acc> accs_;
  std::vector<StringSet> sets_;
  std::vector<std::vector<double>> pvals_;
  std::vector<Selected> sels_;
  // kSubquery: per group, the state of the subquery's collecting stage.
  std::vector<std::unique_ptr<Collector>> subs_;
  std::vector<std::string> sub_warnings_;  // of subqueries' later stages, reported by Finish
  bool has_subquery_ = false;              // some metric is a subquery
  size_t bytes_ = 0;

  static size_t SelectedBytes(const Selected& s) {
    size_t n = RowBytes(s.row);
    for (const auto& l : s.last) {
      if (l)
        n += sizeof(*l) + (std::holds_alternative<std::string>(l->second)
                               ? std::get<std::string>(l->second).size()
                               : 0);
    }
    return n;
  }

  // Scratch reused by Add.
  std::string key_buf_, scratch_, scratch2_;
};

void AggregateCollector::Encode(std::string* out) const {
  PutHeader(out, StateTag::kAggregate);
  out->push_back(static_cast<char>(WireGrouping(grouping_)));
  PutVarint64(out, fields_.size());
  PutVarsint64(out, span_);
  PutVarint64(out, metrics_.size());
  for (const MetricSpec& m : metrics_) {
    out->push_back(static_cast<char>(WireKind(m.kind)));
    out->push_back(m.IsDistinct() ? 1 : 0);
  }
  std::vector<uint32_t> order(keys_.size());
  for (uint32_t g = 0; g < order.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(),
            [this](uint32_t a, uint32_t b) { return keys_[a] < keys_[b]; });
  PutVarint64(out, order.size());
  std::vector<const std::string*> values;
  for (uint32_t g : order) {
    PutLengthPrefixed(out, keys_[g]);
    const Acc* a = AccsOf(g);
    for (size_t m = 0; m < stride(); ++m) {
      const MetricSpec& spec = metrics_[m];
      if (spec.UsesSet()) {
        const StringSet& set = sets_[a[m].aux];
        values.clear();
        for (const std::string& s : set) values.push_back(&s);
        std::sort(values.begin(), values.end(),
                  [](const std::string* x, const std::string* y) { return *x < *y; });
        PutVarint64(out, values.size());
        for (const std::string* s : values) PutLengthPrefixed(out, *s);
        continue;
      }
      switch (spec.kind) {
        case Metric::Kind::kCount:
          PutVarint64(out, static_cast<uint64_t>(a[m].n));
          break;
        case Metric::Kind::kSum:
        case Metric::Kind::kAvg:
          PutVarint64(out, static_cast<uint64_t>(a[m].n));
          out->push_back(static_cast<char>(a[m].flags & 1));
          PutVarsint64(out, static_cast<int64_t>(a[m].isum >> 64));
          PutVarint64(out, static_cast<uint64_t>(a[m].isum));
          PutDouble(out, a[m].dsum);
          break;
        case Metric::Kind::kMin:
        case Metric::Kind::kMax:
          PutVarint64(out, static_cast<uint64_t>(a[m].n));
          if (a[m].n > 0) {
            if (a[m].flags & 1) {
              out->push_back(1);
              PutVarsint64(out, static_cast<int64_t>(a[m].isum));
            } else {
              out->push_back(0);
              PutDouble(out, a[m].dsum);
            }
          }
          break;
        case Metric::Kind::kCollect:
          break;  // a set: encoded above
        case Metric::Kind::kSubquery: {
          std::string state;
          subs_[a[m].aux]->Encode(&state);
          PutLengthPrefixed(out, state);
          break;
        }
        case Metric::Kind::kSelectMax:
        case Metric::Kind::kSelectMin: {
          const Selected& sel = sels_[a[m].aux];
          out->push_back(sel.has ? 1 : 0);
          if (sel.has) {
            out->push_back(sel.best.is_int ? 1 : 0);
            if (sel.best.is_int) {
              PutVarsint64(out, sel.best.i);
            } else {
              PutDouble(out, sel.best.d);
            }
            PutKey(out, sel.key);
            PutRow(out, sel.row);
          }
          break;
        }
        case Metric::Kind::kSelectLast: {
          const Selected& sel = sels_[a[m].aux];
          for (const auto& l : sel.last) {
            out->push_back(l ? 1 : 0);
            if (l) {
              PutKey(out, l->first);
              PutValue(out, l->second);
            }
          }
          break;
        }
        case Metric::Kind::kPercentile:
        case Metric::Kind::kStdDev:
        case Metric::Kind::kRange: {
          const std::vector<double>& vals = pvals_[a[m].aux];
          PutVarint64(out, vals.size());
          for (double d : vals) PutDouble(out, d);
          break;
        }
      }
    }
  }
}

Status AggregateCollector::Decode(std::string_view bytes) {
  Reader in(bytes);
  uint8_t grouping;
  uint64_t nfields, nmetrics;
  int64_t span;
  if (!in.Header(StateTag::kAggregate) || !in.Byte(&grouping) || !in.Varint(&nfields) ||
      !in.Svarint(&span) || !in.Varint(&nmetrics)) {
    return Malformed("truncated or malformed aggregate header");
  }
  if (grouping != WireGrouping(grouping_) || nfields != fields_.size() || span != span_ ||
      nmetrics != metrics_.size()) {
    return Malformed("aggregate state of another stage");
  }
  for (const MetricSpec& m : metrics_) {
    uint8_t kind, distinct;
    if (!in.Byte(&kind) || !in.Byte(&distinct)) return Malformed("truncated metric list");
    if (kind != WireKind(m.kind) || distinct != (m.IsDistinct() ? 1 : 0)) {
      return Malformed("aggregate state of another stage");
    }
  }
  // Start from no groups (the constructor's kNone group is decoded like any other).
  index_ = GroupIndex();
  keys_.clear();
  accs_.clear();
  sets_.clear();
  pvals_.clear();
  sels_.clear();
  subs_.clear();
  bytes_ = 0;
  uint64_t ngroups;
  if (!in.Count(&ngroups, 1 + stride())) return Malformed("truncated group count");
  if (grouping_ == Stage::Grouping::kNone && ngroups != 1) {
    return Malformed("an ungrouped aggregate must hold exactly one group");
  }
  std::vector<std::string_view> parts;
  for (uint64_t i = 0; i < ngroups; ++i) {
    std::string_view key;
    if (!in.Bytes(&key)) return Malformed("truncated group key");
    if (!SplitGroupKey(key, &parts)) return Malformed("group key does not fit the stage");
    if (index_.Find(key, GroupIndex::Hash(key), keys_) != GroupIndex::kAbsent) {
      return Malformed("duplicate group key");
    }
    const uint32_t g = FindOrAdd(key);
    Acc* a = AccsOf(g);
    for (size_t m = 0; m < stride(); ++m) {
      const MetricSpec& spec = metrics_[m];
      if (spec.UsesSet()) {
        uint64_t n;
        if (!in.Count(&n, 1)) return Malformed("truncated distinct value set");
        StringSet& set = sets_[a[m].aux];
        set.reserve(n);
        std::string_view prev;
        for (uint64_t k = 0; k < n; ++k) {
          std::string_view v;
          if (!in.Bytes(&v)) return Malformed("truncated distinct value");
          if (k > 0 && !(prev < v)) return Malformed("distinct values not strictly ascending");
          set.emplace(v);
          bytes_ += v.size() + 48;
          prev = v;
        }
        continue;
      }
      if (spec.IsSelect()) {
        Selected& sel = sels_[a[m].aux];
        if (spec.kind == Metric::Kind::kSelectLast) {
          for (size_t k = 0; k < sel.last.size(); ++k) {
            uint8_t has;
            if (!in.Byte(&has) || has > 1) return Malformed("truncated or malformed selectLast");
            if (!has) continue;
            RecordKey key;
            Value v;
            if (!in.Key(&key) || !in.GetValue(&v)) return Malformed("truncated selectLast value");
            sel.last[k].emplace(key, std::move(v));
          }
        } else {
          uint8_t has;
          if (!in.Byte(&has) || has > 1) return Malformed("truncated or malformed selection");
          if (has) {
            uint8_t is_int;
            if (!in.Byte(&is_int) || is_int > 1) return Malformed("malformed selection value");
            sel.has = true;
            sel.best.is_int = is_int == 1;
            if (is_int) {
              if (!in.Svarint(&sel.best.i)) return Malformed("truncated selection value");
              sel.best.d = static_cast<double>(sel.best.i);
            } else if (!in.Double(&sel.best.d) || std::isnan(sel.best.d)) {
              return Malformed("malformed selection value");
            }
            if (!in.Key(&sel.key) || !in.GetRow(&sel.row)) {
              return Malformed("truncated selection row");
            }
          }
        }
        bytes_ += SelectedBytes(sel);
        continue;
      }
      if (spec.IsSubquery()) {
        std::string_view state;
        if (!in.Bytes(&state)) return Malformed("truncated subquery state");
        auto sub = DecodeCollector(&spec.sub->stages[spec.sub->collect], ctx_, state);
        if (!sub.ok()) return Malformed("subquery state: " + sub.status().message());
        bytes_ -= subs_[a[m].aux]->MemoryBytes();
        subs_[a[m].aux] = std::move(sub).value();
        bytes_ += subs_[a[m].aux]->MemoryBytes();
        continue;
      }
      uint64_t n;
      if (!in.Varint(&n) || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Malformed("truncated metric state");
      }
      a[m].n = static_cast<int64_t>(n);
      switch (spec.kind) {
        case Metric::Kind::kCount:
          break;
        case Metric::Kind::kSum:
        case Metric::Kind::kAvg: {
          uint8_t flags;
          int64_t hi;
          uint64_t lo;
          double d;
          if (!in.Byte(&flags) || !in.Svarint(&hi) || !in.Varint(&lo) || !in.Double(&d) ||
              flags > 1) {
            return Malformed("truncated or malformed sum state");
          }
          a[m].flags = flags;
          a[m].isum = static_cast<__int128>(
              (static_cast<unsigned __int128>(static_cast<uint64_t>(hi)) << 64) | lo);
          a[m].dsum = d;
          break;
        }
        case Metric::Kind::kMin:
        case Metric::Kind::kMax:
          if (n > 0) {
            uint8_t is_int;
            if (!in.Byte(&is_int) || is_int > 1) return Malformed("malformed min/max state");
            if (is_int) {
              int64_t v;
              if (!in.Svarint(&v)) return Malformed("truncated min/max state");
              a[m].isum = v;
              a[m].dsum = static_cast<double>(v);
              a[m].flags = 1;
            } else {
              double d;
              if (!in.Double(&d) || std::isnan(d)) return Malformed("malformed min/max state");
              a[m].dsum = d;
            }
          }
          break;
        case Metric::Kind::kCollect:
        case Metric::Kind::kSelectMax:
        case Metric::Kind::kSelectMin:
        case Metric::Kind::kSelectLast:
        case Metric::Kind::kSubquery:
          break;  // decoded above
        case Metric::Kind::kPercentile:
        case Metric::Kind::kStdDev:
        case Metric::Kind::kRange: {
          if (!in.Fits(n, 8)) return Malformed("truncated percentile values");
          std::vector<double>& vals = pvals_[a[m].aux];
          vals.reserve(n);
          for (uint64_t k = 0; k < n; ++k) {
            double d;
            if (!in.Double(&d) || std::isnan(d)) return Malformed("malformed percentile value");
            vals.push_back(d);
          }
          bytes_ += n * sizeof(double);
          break;
        }
      }
    }
  }
  if (!in.done()) return Malformed("bytes after the last group");
  return Status::OK();
}

std::vector<Row> AggregateCollector::Finish(std::vector<std::string>* warnings) {
  std::vector<Row> rows;
  switch (grouping_) {
    case Stage::Grouping::kNone:
      EmitRows({0}, Row(), &rows);
      break;
    case Stage::Grouping::kGroupBy:
      rows = FinishGroupBy(warnings);
      break;
    case Stage::Grouping::kBucket:
      rows = FinishBucket(warnings);
      break;
    case Stage::Grouping::kTop:
      rows = FinishTop();
      break;
  }
  // Each distinct notice of the subqueries once.
  std::unordered_set<std::string> seen;
  for (std::string& w : sub_warnings_) {
    if (seen.insert(w).second) warnings->push_back(std::move(w));
  }
  return rows;
}

std::vector<Row> AggregateCollector::FinishGroupBy(std::vector<std::string>* warnings) {
  const size_t nf = fields_.size();
  std::vector<std::string_view> parts(keys_.size() * nf);
  std::vector<uint32_t> order(keys_.size());
  std::vector<std::string_view> split;
  for (uint32_t g = 0; g < keys_.size(); ++g) {
    SplitGroupKey(keys_[g], &split);
    for (size_t f = 0; f < nf && f < split.size(); ++f) parts[g * nf + f] = split[f];
    order[g] = g;
  }
  const size_t n = std::min(order.size(), static_cast<size_t>(limit_));
  if (nf == 1) {
    // One field: the keys are distinct strings.
    SortDistinct(parts, &order);
  } else {
    auto less = [&parts, nf](uint32_t a, uint32_t b) {
      const std::string_view* pa = parts.data() + static_cast<size_t>(a) * nf;
      const std::string_view* pb = parts.data() + static_cast<size_t>(b) * nf;
      return std::lexicographical_compare(pa, pa + nf, pb, pb + nf);
    };
    if (n < order.size()) {
      std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(),
                        less);
    } else {
      std::sort(order.begin(), order.end(), less);
    }
  }
  if (n < order.size()) {
    warnings->push_back("groupBy: " + std::to_string(order.size()) +
                        " groups exceed limit=" + std::to_string(limit_) + "; kept the first " +
                        std::to_string(n) + " in key order");
  }
  std::vector<Row> rows;
  rows.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t g = order[i];
    Row row;
    for (size_t f = 0; f < nf; ++f) {
      SetColumn(&row, fields_[f], Value(std::string(parts[g * nf + f])));
    }
    EmitRows({g}, std::move(row), &rows);
  }
  return rows;
}

// groupBy() then sort(limit=N) over fewer than all of its groups (the top-N shape): picks the N
// groups sort() would keep from their sort fields' values alone, then builds only their rows.
// Ties on the sort fields go to the earlier row of groupBy's output, whose rows are in key order,
// so to the smaller key, as in sort(). Not taken for groupBy(limit=) cutting groups, subquery
// metrics, or a sort field that is neither a grouping field nor a metric column.
std::optional<std::vector<Row>> AggregateCollector::FinishThrough(
    const Stage& next, std::vector<std::string>* warnings) {
  const size_t cap = LimitOf(next);
  if (grouping_ != Stage::Grouping::kGroupBy || has_subquery_ || next.kind != Stage::Kind::kSort ||
      keys_.size() > static_cast<size_t>(limit_) || cap == 0 || cap >= keys_.size()) {
    return std::nullopt;
  }
  const size_t nf = fields_.size();
  // Where each sort field's value comes from: a grouping field (its index) or the metrics' row.
  constexpr size_t kMetricColumn = static_cast<size_t>(-1);
  std::vector<size_t> source;
  for (const std::string& f : next.fields) {
    const auto it = std::find(fields_.begin(), fields_.end(), f);
    if (it != fields_.end()) {
      source.push_back(static_cast<size_t>(it - fields_.begin()));
      continue;
    }
    const bool metric = std::any_of(metrics_.begin(), metrics_.end(), [&f](const MetricSpec& m) {
      return !m.IsSelect() && std::find(m.names.begin(), m.names.end(), f) != m.names.end();
    });
    if (!metric) return std::nullopt;
    source.push_back(kMetricColumn);
  }
  const std::vector<Stage::SortKey> keys = SortKeysOf(next);
  struct Candidate {
    uint32_t group;
    std::vector<std::string_view> parts;
    std::vector<std::optional<Value>> vals;
  };
  auto before = [&keys](const Candidate& a, const Candidate& b) {
    const int c = CompareSortFields(a.vals, b.vals, keys);
    return c != 0 ? c < 0 : a.parts < b.parts;
  };
  // A max-heap by output order of the `cap` best so far: its front is the last one kept.
  std::vector<Candidate> kept;
  kept.reserve(cap + 1);
  Candidate c;
  Row metrics;
  for (uint32_t g = 0; g < keys_.size(); ++g) {
    SplitGroupKey(keys_[g], &c.parts);
    c.parts.resize(nf);
    metrics.clear();
    AppendMetrics({g}, &metrics);
    c.vals.clear();
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] != kMetricColumn) {
        c.vals.emplace_back(Value(std::string(c.parts[source[i]])));
      } else if (const Value* v = RowGet(metrics, next.fields[i])) {
        c.vals.emplace_back(*v);
      } else {
        c.vals.emplace_back(std::nullopt);
      }
    }
    c.group = g;
    if (kept.size() == cap && !before(c, kept.front())) continue;
    if (kept.size() == cap) {
      std::pop_heap(kept.begin(), kept.end(), before);
      kept.pop_back();
    }
    kept.push_back(c);
    std::push_heap(kept.begin(), kept.end(), before);
  }
  std::sort_heap(kept.begin(), kept.end(), before);
  std::vector<Row> rows;
  rows.reserve(kept.size());
  for (const Candidate& k : kept) {
    Row row;
    for (size_t f = 0; f < nf; ++f) SetColumn(&row, fields_[f], Value(std::string(k.parts[f])));
    EmitRows({k.group}, std::move(row), &rows);
  }
  SortLimitWarning(keys_.size(), cap, warnings);
  ProjectColumns(next.table_columns, &rows);
  return rows;
}

std::vector<Row> AggregateCollector::FinishTop() {
  struct G {
    uint32_t g;
    std::vector<std::string_view> parts;
    Value value;
  };
  const MetricSpec& spec = metrics_[0];
  std::vector<G> groups(keys_.size());
  double total = 0;
  for (uint32_t g = 0; g < keys_.size(); ++g) {
    groups[g].g = g;
    SplitGroupKey(keys_[g], &groups[g].parts);
    const Acc& a = AccsOf(g)[0];
    groups[g].value =
        spec.kind == Metric::Kind::kCount ? Value(a.n) : SumValue(a.isum, a.dsum, a.flags & 1);
    total += std::get_if<int64_t>(&groups[g].value)
                 ? static_cast<double>(std::get<int64_t>(groups[g].value))
                 : std::get<double>(groups[g].value);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const G& a, const G& b) {
    const int c = CompareNumeric(a.value, b.value);
    if (c != 0) return c > 0;
    return PartsLess(a.parts, b.parts);
  });
  const size_t n = std::min(groups.size(), static_cast<size_t>(limit_));
  std::vector<Row> rows(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t f = 0; f < fields_.size(); ++f) {
      SetColumn(&rows[i], fields_[f], Value(std::string(groups[i].parts[f])));
    }
    const Value& v = groups[i].value;
    SetColumn(&rows[i], spec.names[0], v);
    if (top_percent_) {
      const double x = std::get_if<int64_t>(&v) ? static_cast<double>(std::get<int64_t>(v))
                                                : std::get<double>(v);
      SetColumn(&rows[i], "percent", Value(total != 0 ? x * 100.0 / total : 0.0));
    }
  }
  if (!top_rest_.empty() && n < groups.size()) {
    // top(rest=name): one more row, every field `name`, with the count (sum) of the others.
    int64_t irest = 0;
    double drest = 0;
    bool is_int = true;
    for (size_t i = n; i < groups.size(); ++i) {
      if (const int64_t* x = std::get_if<int64_t>(&groups[i].value)) {
        irest += *x;
      } else {
        is_int = false;
        drest += std::get<double>(groups[i].value);
      }
    }
    Row rest;
    for (const std::string& f : fields_) SetColumn(&rest, f, Value(top_rest_));
    const double x = static_cast<double>(irest) + drest;
    SetColumn(&rest, spec.names[0], is_int ? Value(irest) : Value(x));
    if (top_percent_) SetColumn(&rest, "percent", Value(total != 0 ? x * 100.0 / total : 0.0));
    rows.push_back(std::move(rest));
  }
  return rows;
}

std::vector<Row> AggregateCollector::FinishBucket(std::vector<std::string>* warnings) {
  const size_t nf = fields_.size();
  // Series: the key after the bucket start.
  struct Series {
    std::vector<std::string_view> parts;
    std::vector<uint32_t> groups;
    Value rank;
  };
  std::map<std::string_view, Series> series;
  for (uint32_t g = 0; g < keys_.size(); ++g) {
    std::string_view rest = std::string_view(keys_[g]).substr(8);
    Series& s = series[rest];
    if (s.groups.empty()) SplitGroupKey(keys_[g], &s.parts);
    s.groups.push_back(g);
  }
  std::vector<uint8_t> keep(keys_.size(), 1);
  if (nf > 0 && series.size() > static_cast<size_t>(limit_)) {
    // Rank each series by the highest value its metrics give over the whole range.
    std::vector<Series*> order;
    for (auto& [k, s] : series) {
      std::vector<Row> whole;
      EmitRows(s.groups, Row(), &whole);
      double best = -std::numeric_limits<double>::infinity();
      for (const Row& w : whole) {
        for (const auto& [name, v] : w) {
          std::optional<double> x = ValueToNumber(v);
          if (x && !std::isnan(*x)) best = std::max(best, *x);
        }
      }
      s.rank = Value(best);
      order.push_back(&s);
    }
    std::stable_sort(order.begin(), order.end(), [](const Series* a, const Series* b) {
      const int c = CompareNumeric(a->rank, b->rank);
      if (c != 0) return c > 0;
      return PartsLess(a->parts, b->parts);
    });
    warnings->push_back(function_ + ": " + std::to_string(series.size()) +
                        " series exceed limit=" + std::to_string(limit_) + "; kept the " +
                        std::to_string(limit_) + " with the highest values");
    for (size_t i = static_cast<size_t>(limit_); i < order.size(); ++i) {
      for (uint32_t g : order[i]->groups) keep[g] = 0;
    }
  }

  // (bucket, group or -1 for an empty bucket), ordered by bucket then series.
  struct Out {
    int64_t bucket;
    int64_t group;
    const std::vector<std::string_view>* parts;
  };
  std::vector<Out> out;
  std::vector<std::string_view> no_parts;
  for (auto& [k, s] : series) {
    for (uint32_t g : s.groups) {
      if (keep[g]) out.push_back(Out{BucketOf(keys_[g]), g, &s.parts});
    }
  }
  if (nf == 0 && range_.end_ms > range_.start_ms) {
    std::optional<int64_t> first = FloorTo(range_.start_ms, span_);
    std::optional<int64_t> last = FloorTo(range_.end_ms - 1, span_);
    if (first && last) {
      const double count =
          (static_cast<double>(*last) - static_cast<double>(*first)) / static_cast<double>(span_) +
          1;
      if (count > static_cast<double>(kMaxFilledBuckets)) {
        warnings->push_back(function_ + ": the range holds " +
                            std::to_string(static_cast<int64_t>(count)) + " buckets of " +
                            std::to_string(span_) + " ms; buckets without events are left out");
      } else {
        std::unordered_set<int64_t> present;
        for (const Out& o : out) present.insert(o.bucket);
        for (int64_t b = *first;; b += span_) {
          if (!present.count(b)) out.push_back(Out{b, -1, &no_parts});
          if (b >= *last) break;
        }
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Out& a, const Out& b) {
    if (a.bucket != b.bucket) return a.bucket < b.bucket;
    return PartsLess(*a.parts, *b.parts);
  });
  // window(): the buckets of each series by start, and the number of buckets a window spans.
  int64_t window_buckets = 0;
  for (const MetricSpec& spec : metrics_) {
    if (!spec.IsWindow()) continue;
    window_buckets = spec.window_buckets > 0
                         ? spec.window_buckets
                         : std::max<int64_t>(1, (spec.window_span_ms + span_ / 2) / span_);
  }
  std::map<std::pair<const std::vector<std::string_view>*, int64_t>, uint32_t> by_bucket;
  if (window_buckets > 0) {
    for (const Out& o : out) {
      if (o.group >= 0) {
        by_bucket[{nf > 0 ? o.parts : nullptr, o.bucket}] = static_cast<uint32_t>(o.group);
      }
    }
  }
  const std::optional<int64_t> first_bucket = FloorTo(range_.start_ms, span_);
  std::vector<Row> rows;
  rows.reserve(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    Row row;
    row.emplace_back("_bucket", Value(out[i].bucket));
    for (size_t f = 0; f < nf; ++f) {
      SetColumn(&row, fields_[f], Value(std::string((*out[i].parts)[f])));
    }
    // The window of bucket b: the window_buckets buckets before it, all inside the range (else
    // the window metrics are left out, as LogScale leaves the first buckets empty).
    std::vector<uint32_t> window;
    bool has_window = false;
    // (In doubles: window_buckets * span_ may not fit an int64_t.)
    if (window_buckets > 0 && first_bucket &&
        static_cast<double>(out[i].bucket) -
                static_cast<double>(window_buckets) * static_cast<double>(span_) >=
            static_cast<double>(*first_bucket)) {
      has_window = true;
      for (int64_t k = 1; k <= window_buckets; ++k) {
        auto it = by_bucket.find({nf > 0 ? out[i].parts : nullptr, out[i].bucket - k * span_});
        if (it != by_bucket.end()) window.push_back(it->second);
      }
    }
    const std::vector<uint32_t>* w = has_window ? &window : nullptr;
    if (out[i].group >= 0) {
      EmitRows({static_cast<uint32_t>(out[i].group)}, std::move(row), &rows, w);
    } else {
      EmitRows({}, std::move(row), &rows, w);
    }
  }
  if (!units_.empty()) ApplyUnits(&rows);
  return rows;
}

void AggregateCollector::ApplyUnits(std::vector<Row>* rows) const {
  for (size_t m = 0; m < metrics_.size(); ++m) {
    const Stage::UnitConversion& u =
        units_[units_.size() == 1 ? 0 : std::min(m, units_.size() - 1)];
    const double from = static_cast<double>(u.from_ms > 0 ? u.from_ms : span_);
    const double to = static_cast<double>(u.to_ms > 0 ? u.to_ms : span_);
    const double factor = to / from / u.divisor;
    for (Row& row : *rows) {
      for (const std::string& name : metrics_[m].names) {
        for (auto& [k, v] : row) {
          if (k != name) continue;
          if (std::optional<double> x = ValueToNumber(v)) v = Value(*x * factor);
        }
      }
    }
  }
}

// ---- construction ----

std::unique_ptr<Collector> Make(const Stage& st, const CollectorContext& ctx) {
  using M = KeptRowsCollector::Mode;
  switch (st.kind) {
    case Stage::Kind::kHead:
      return std::make_unique<KeptRowsCollector>(M::kHead, LimitOf(st), std::vector<std::string>{});
    case Stage::Kind::kTail:
      return std::make_unique<KeptRowsCollector>(M::kTail, LimitOf(st), std::vector<std::string>{});
    case Stage::Kind::kTable:
      return std::make_unique<KeptRowsCollector>(M::kTable, LimitOf(st), st.fields);
    case Stage::Kind::kSort:
      return std::make_unique<SortCollector>(st.fields, SortKeysOf(st), LimitOf(st),
                                             st.table_columns);
    case Stage::Kind::kAggregate:
      return std::make_unique<AggregateCollector>(st, ctx);
    case Stage::Kind::kRows:
      return std::make_unique<RowsCollector>(st);
    default:
      return nullptr;
  }
}

}  // namespace

std::unique_ptr<Collector> NewCollector(const Stage& st, const CollectorContext& ctx) {
  return Make(st, ctx);
}

std::unique_ptr<Collector> NewEventCollector(const CollectorContext& ctx) {
  return std::make_unique<KeptRowsCollector>(KeptRowsCollector::Mode::kEvents, ctx.max_events,
                                             std::vector<std::string>{});
}

Result<std::unique_ptr<Collector>> DecodeCollector(const Stage* st, const CollectorContext& ctx,
                                                   std::string_view bytes) {
  if (st == nullptr) {
    auto c = std::make_unique<KeptRowsCollector>(KeptRowsCollector::Mode::kEvents, ctx.max_events,
                                                 std::vector<std::string>{});
    RETURN_IF_ERROR(c->Decode(bytes));
    return std::unique_ptr<Collector>(std::move(c));
  }
  std::unique_ptr<Collector> c = Make(*st, ctx);
  if (c == nullptr) {
    return Status::InvalidArgument("collector state: stage '" + st->function +
                                   "' has no collector");
  }
  Status s;
  if (auto* k = dynamic_cast<KeptRowsCollector*>(c.get())) {
    s = k->Decode(bytes);
  } else if (auto* so = dynamic_cast<SortCollector*>(c.get())) {
    s = so->Decode(bytes);
  } else if (auto* rc = dynamic_cast<RowsCollector*>(c.get())) {
    s = rc->Decode(bytes);
  } else {
    s = static_cast<AggregateCollector*>(c.get())->Decode(bytes);
  }
  RETURN_IF_ERROR(s);
  return c;
}

}  // namespace sediment::query
