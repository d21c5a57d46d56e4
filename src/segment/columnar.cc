#include "segment/columnar.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include <xxhash.h>

#include "common/coding.h"
#include "segment/varint_cursor.h"

namespace sediment::segment_v2 {
namespace {

using segment_internal::Cursor;
using segment_internal::PutPosition;

// Dictionary encoding is chosen for a column with at most this many distinct values that is also
// at most half as many as the column's values.
constexpr size_t kMaxDictValues = 4096;
// Field values shorter than this are not referenced from the @rawstring template (a reference
// costs about two bytes).
constexpr size_t kMinReferencedValue = 3;
// Longest decimal rendering of an int64 ("-9223372036854775808").
constexpr size_t kMaxIntText = 20;

// True when `s` is the canonical decimal text of an int64 (no '+', no leading zeros, no "-0").
bool CanonicalInt(std::string_view s, int64_t* v) {
  if (s.empty() || s.size() > kMaxIntText) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  auto [p, ec] = std::from_chars(b, e, *v);
  if (ec != std::errc() || p != e) return false;
  char buf[kMaxIntText];
  auto [q, ec2] = std::to_chars(buf, buf + sizeof(buf), *v);
  return ec2 == std::errc() && static_cast<size_t>(q - buf) == s.size() &&
         std::memcmp(buf, b, s.size()) == 0;
}

}  // namespace

size_t TextHash::operator()(std::string_view s) const {
  return static_cast<size_t>(XXH3_64bits(s.data(), s.size()));
}

uint64_t NameTable::Id(std::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  const uint64_t id = names_.size();
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

void BlockEncoder::Encode(const PositionedEvent* ev, size_t n, NameTable* names,
                          std::vector<EncodedColumn>* out,
                          std::vector<std::string_view>* unreferenced) {
  out->clear();
  if (unreferenced != nullptr) unreferenced->clear();
  out->resize(kBuiltinColumns);
  for (uint64_t id = 0; id < kBuiltinColumns; ++id) (*out)[id].id = id;
  std::string& ts = (*out)[kTimestamps].data;
  std::string& ing = (*out)[kIngest].data;
  std::string& pos = (*out)[kPositions].data;
  std::string& layout = (*out)[kLayout].data;
  std::string raw_lengths, raw_refs, literal;
  std::vector<uint64_t> ids;
  slot_ids_.clear();
  struct PositionRun {
    uint64_t d, x, len;
  };
  std::vector<PositionRun> runs;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = ev[i].event;
    if (i == 0) {
      PutVarsint64(&ts, e.timestamp_ms);
      PutVarsint64(&ing, e.ingest_ms);
      PutPosition(&pos, ev[i].pos);
    } else {
      const Event& p = ev[i - 1].event;
      PutVarsint64(&ts, static_cast<int64_t>(static_cast<uint64_t>(e.timestamp_ms) -
                                             static_cast<uint64_t>(p.timestamp_ms)));
      PutVarsint64(&ing, static_cast<int64_t>(static_cast<uint64_t>(e.ingest_ms) -
                                              static_cast<uint64_t>(p.ingest_ms)));
      const Position a = ev[i - 1].pos, b = ev[i].pos;
      const uint64_t d =
          static_cast<uint64_t>(b.offset.value) - static_cast<uint64_t>(a.offset.value);
      const uint64_t x = d == 0 ? b.index - a.index - 1 : b.index;
      if (!runs.empty() && runs.back().d == d && runs.back().x == x) {
        ++runs.back().len;
      } else {
        runs.push_back(PositionRun{d, x, 1});
      }
    }
    // Layout and field columns.
    PutVarint64(&layout, e.fields.size());
    for (size_t slot = 0; slot < e.fields.size(); ++slot) {
      const Field& f = e.fields[slot];
      uint64_t id;
      if (slot < slot_ids_.size() && slot_ids_[slot].first == f.name) {
        id = slot_ids_[slot].second;
      } else {
        id = names->Id(f.name);
        if (slot < slot_ids_.size()) {
          slot_ids_[slot] = {f.name, id};
        } else {
          slot_ids_.emplace_back(f.name, id);
        }
      }
      PutVarint64(&layout, id);
      if (id >= columns_.size()) columns_.resize(id + 1);
      FieldColumn& col = columns_[id];
      if (col.counts.empty()) {
        col.counts.assign(n, 0);
        col.values.clear();
        ids.push_back(id);
      }
      ++col.counts[i];
      col.values.push_back(f.value);
    }
    // @rawstring as a template: literal pieces and references to the event's field values, in
    // order, never overlapping.
    PutVarint64(&raw_lengths, e.raw.size());
    std::string refs;
    size_t prev_end = 0, nrefs = 0;
    int64_t prev_slot = -1;
    for (size_t slot = 0; slot < e.fields.size(); ++slot) {
      const std::string& v = e.fields[slot].value;
      if (v.size() < kMinReferencedValue) {
        if (unreferenced != nullptr) unreferenced->push_back(v);
        continue;
      }
      const size_t at = e.raw.find(v, prev_end);
      if (at == std::string::npos) {
        if (unreferenced != nullptr) unreferenced->push_back(v);
        continue;
      }
      PutVarint64(&refs, at - prev_end);
      PutVarint64(&refs, static_cast<uint64_t>(static_cast<int64_t>(slot) - prev_slot - 1));
      literal.append(e.raw, prev_end, at - prev_end);
      prev_end = at + v.size();
      prev_slot = static_cast<int64_t>(slot);
      ++nrefs;
    }
    literal.append(e.raw, prev_end, std::string::npos);
    PutVarint64(&raw_refs, nrefs);
    raw_refs.append(refs);
  }
  PutVarint64(&pos, runs.size());
  for (const PositionRun& r : runs) {
    PutVarint64(&pos, r.d);
    PutVarint64(&pos, r.x);
    PutVarint64(&pos, r.len);
  }
  {
    std::string& raw = (*out)[kRaw].data;
    PutVarint64(&raw, raw_lengths.size() + raw_refs.size());
    raw.append(raw_lengths);
    raw.append(raw_refs);
    raw.append(literal);
  }

  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    FieldColumn& col = columns_[id];
    EncodedColumn c;
    c.id = kFirstField + id;
    const size_t m = col.values.size();
    if (m == n &&
        std::all_of(col.counts.begin(), col.counts.end(), [](uint32_t k) { return k == 1; })) {
      c.data.push_back(1);  // every event has exactly one value
    } else {
      c.data.push_back(0);
      for (uint32_t k : col.counts) PutVarint32(&c.data, k);
    }
    // Dictionary: stops as soon as the column cannot qualify (more than kMaxDictValues distinct
    // values, or more than half as many as its values: the count only grows).
    const size_t dict_limit = std::min(kMaxDictValues, m / 2);
    dict_.clear();
    dict_list_.clear();
    dict_ids_.clear();
    bool dict_ok = true;
    for (std::string_view v : col.values) {
      auto [it, inserted] = dict_.try_emplace(v, static_cast<uint32_t>(dict_list_.size()));
      if (inserted) {
        dict_list_.push_back(v);
        if (dict_list_.size() > dict_limit) {
          dict_ok = false;
          break;
        }
      }
      dict_ids_.push_back(it->second);
    }
    if (dict_ok) {
      c.encoding = kDict;
      PutVarint64(&c.data, dict_list_.size());
      for (std::string_view v : dict_list_) PutLengthPrefixed(&c.data, v);
      if (dict_list_.size() <= 256) {
        for (uint32_t k : dict_ids_) c.data.push_back(static_cast<char>(k));
      } else {
        for (uint32_t k : dict_ids_) PutVarint32(&c.data, k);
      }
      out->push_back(std::move(c));
      col.counts.clear();
      continue;
    }
    ints_.clear();
    bool all_int = true;
    for (std::string_view v : col.values) {
      int64_t x;
      if (!CanonicalInt(v, &x)) {
        all_int = false;
        break;
      }
      ints_.push_back(x);
    }
    if (all_int) {
      c.encoding = kInt;
      c.min = *std::min_element(ints_.begin(), ints_.end());
      c.max = *std::max_element(ints_.begin(), ints_.end());
      for (int64_t x : ints_) PutVarsint64(&c.data, x);
    } else {
      c.encoding = kPlain;
      for (std::string_view v : col.values) PutVarint64(&c.data, v.size());
      for (std::string_view v : col.values) c.data.append(v);
    }
    col.counts.clear();
    out->push_back(std::move(c));
  }
}

namespace {

// True when every byte of `b` is zero.
bool AllZero(std::string_view b) {
  unsigned char any = 0;
  for (char c : b) any |= static_cast<unsigned char>(c);
  return any == 0;
}

struct ParsedColumn {
  uint64_t id = 0;
  std::string_view name;
  std::vector<uint32_t> counts;  // per event
  std::vector<std::string_view> values;
  std::vector<int64_t> ints;           // kInt, before rendering
  std::vector<std::string_view> dict;  // kDict: the distinct values
  std::vector<uint32_t> dict_ids;      // kDict: per value, its index in `dict`
  bool one_each = false;               // every event has exactly one value (mode 1)
  bool ids_only = false;  // kDict with at most one value per event: only dict and dict_ids
  size_t next = 0;        // values taken so far
  size_t prefix = 0;      // full decode: values of the events before the next one
};

thread_local std::vector<ParsedColumn> tls_columns;
thread_local std::vector<uint64_t> tls_lengths;
thread_local std::vector<int32_t> tls_slots;

// memcpy of n bytes, inlined for the short copies that template reassembly makes (a field value
// or a literal gap is mostly a few bytes): reads and writes only [src, src + n), [dst, dst + n).
inline void CopyBytes(char* dst, const char* src, size_t n) {
  if (n <= 16) {
    if (n >= 8) {
      uint64_t a, b;
      std::memcpy(&a, src, 8);
      std::memcpy(&b, src + n - 8, 8);
      std::memcpy(dst, &a, 8);
      std::memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
      uint32_t a, b;
      std::memcpy(&a, src, 4);
      std::memcpy(&b, src + n - 4, 4);
      std::memcpy(dst, &a, 4);
      std::memcpy(dst + n - 4, &b, 4);
    } else if (n != 0) {
      const char a = src[0], b = src[n / 2], c = src[n - 1];
      dst[0] = a;
      dst[n / 2] = b;
      dst[n - 1] = c;
    }
    return;
  }
  if (n <= 32) {
    char a[16], b[16];
    std::memcpy(a, src, 16);
    std::memcpy(b, src + n - 16, 16);
    std::memcpy(dst, a, 16);
    std::memcpy(dst + n - 16, b, 16);
    return;
  }
  std::memcpy(dst, src, n);
}

// Decodes n >= 1 delta-coded values; *lo and *hi get the smallest and largest.
bool DecodeDeltas(std::string_view data, size_t n, std::vector<int64_t>* col, int64_t* lo,
                  int64_t* hi) {
  Cursor c{data.data(), data.data() + data.size()};
  col->resize(n);
  int64_t* __restrict out = col->data();
  uint64_t v = static_cast<uint64_t>(c.S());
  int64_t mn = static_cast<int64_t>(v), mx = mn;
  out[0] = mn;
  for (size_t i = 1; i < n; ++i) {
    v += static_cast<uint64_t>(c.S());
    const int64_t x = static_cast<int64_t>(v);
    out[i] = x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  *lo = mn;
  *hi = mx;
  return c.ok && c.p == c.end;
}

bool DecodePositions(std::string_view data, size_t n, std::vector<Position>* out) {
  Cursor c{data.data(), data.data() + data.size()};
  out->resize(n);
  int64_t off = c.S();
  uint64_t idx = c.V();
  if (idx > std::numeric_limits<uint32_t>::max()) return false;
  (*out)[0] = Position{Offset(off), static_cast<uint32_t>(idx)};
  const uint64_t runs = c.V();
  if (runs > n - 1) return false;
  size_t i = 1;
  for (uint64_t r = 0; r < runs; ++r) {
    const uint64_t d = c.V();
    const uint64_t x = c.V();
    const uint64_t len = c.V();
    if (!c.ok || x > std::numeric_limits<uint32_t>::max() || len == 0 || len > n - i) return false;
    if (d == 0) {
      // Same offset: each event's index is the previous one's + 1 + x.
      for (uint64_t k = 0; k < len; ++k, ++i) {
        idx = idx + 1 + x;
        if (idx > std::numeric_limits<uint32_t>::max()) return false;
        (*out)[i] = Position{Offset(off), static_cast<uint32_t>(idx)};
      }
    } else {
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      for (uint64_t k = 0; k < len; ++k, ++i) {
        if (__builtin_add_overflow(off, static_cast<int64_t>(d), &off)) return false;
        idx = x;
        (*out)[i] = Position{Offset(off), static_cast<uint32_t>(idx)};
      }
    }
  }
  return i == n && c.ok && c.p == c.end;
}

// Parses a field column chunk; int values are left in col->ints (rendered by the caller). With
// `ids_only`, a dictionary column in which no event has more than one value is left as its
// dictionary and value ids (col->ids_only; col->values stays empty).
bool ParseField(const Chunk& ch, size_t n, bool ids_only, ParsedColumn* col) {
  Cursor c{ch.data.data(), ch.data.data() + ch.data.size()};
  col->counts.resize(n);
  uint64_t m = 0;
  if (c.left() == 0) return false;
  const uint8_t mode = static_cast<uint8_t>(*c.p++);
  col->one_each = mode == 1;
  uint64_t most = 1;  // the most values of one event
  if (mode == 1) {
    // An ids-only dictionary column with one value per event never reads its counts.
    if (!(ids_only && ch.encoding == kDict)) std::fill(col->counts.begin(), col->counts.end(), 1);
    m = n;
  } else if (mode == 0) {
    most = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t k = c.V();
      // Every value takes at least one byte of the chunk.
      if (k > c.left()) return false;
      col->counts[i] = static_cast<uint32_t>(k);
      m += k;
      most = std::max(most, k);
    }
  } else {
    return false;
  }
  col->ids_only = ids_only && ch.encoding == kDict && most <= 1;
  if (!c.ok || m > c.left()) return false;
  col->values.clear();
  col->ints.clear();
  col->dict.clear();
  col->dict_ids.clear();
  switch (ch.encoding) {
    case kPlain: {
      std::vector<uint64_t>& lens = tls_lengths;
      lens.resize(m);
      uint64_t total = 0;
      for (uint64_t j = 0; j < m; ++j) {
        lens[j] = c.V();
        if (lens[j] > c.left()) return false;
        total += lens[j];
      }
      if (!c.ok || total != c.left()) return false;
      col->values.resize(m);
      const char* p = c.p;
      for (uint64_t j = 0; j < m; ++j) {
        col->values[j] = std::string_view(p, lens[j]);
        p += lens[j];
      }
      return true;
    }
    case kDict: {
      const uint64_t nd = c.V();
      if (!c.ok || nd > c.left()) return false;
      std::vector<std::string_view>& dict = col->dict;
      dict.resize(nd);
      for (uint64_t k = 0; k < nd; ++k) {
        const uint64_t len = c.V();
        if (!c.ok || len > c.left()) return false;
        dict[k] = std::string_view(c.p, len);
        c.p += len;
      }
      col->dict_ids.resize(m);
      if (col->ids_only && nd <= 256) {
        if (c.left() != m) return false;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(c.p);
        uint32_t* __restrict ids = col->dict_ids.data();
        uint8_t most = 0;  // one pass: widen and find the largest index
        for (uint64_t j = 0; j < m; ++j) {
          ids[j] = p[j];
          most = std::max(most, p[j]);
        }
        if (m != 0 && most >= nd) return false;
        c.p += m;
        return true;
      }
      if (col->ids_only) {
        for (uint64_t j = 0; j < m; ++j) {
          const uint64_t id = c.V();
          if (id >= nd) return false;
          col->dict_ids[j] = static_cast<uint32_t>(id);
        }
        return c.ok && c.p == c.end;
      }
      col->values.resize(m);
      if (nd <= 256) {
        // One byte per index.
        if (c.left() != m) return false;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(c.p);
        for (uint64_t j = 0; j < m; ++j) {
          const uint32_t id = p[j];
          if (id >= nd) return false;
          col->values[j] = dict[id];
          col->dict_ids[j] = id;
        }
        c.p += m;
        return true;
      }
      for (uint64_t j = 0; j < m; ++j) {
        const uint64_t id = c.V();
        if (id >= nd) return false;
        col->values[j] = dict[id];
        col->dict_ids[j] = static_cast<uint32_t>(id);
      }
      return c.ok && c.p == c.end;
    }
    case kInt: {
      col->ints.resize(m);
      for (uint64_t j = 0; j < m; ++j) col->ints[j] = c.S();
      return c.ok && c.p == c.end;
    }
  }
  return false;
}

}  // namespace

bool DecodeBlock(uint32_t event_count, const std::vector<Chunk>& chunks,
                 const std::vector<std::string>& names, bool full, bool order, uint64_t raw_bytes,
                 DecodedBlock* out, int64_t* min_ts, int64_t* max_ts) {
  const size_t n = event_count;
  if (n == 0 || chunks.size() < kBuiltinColumns) return false;
  // Every raw view already empty (the previous read was a partial one), so a partial read need
  // not clear them again.
  const bool raw_views_empty = out->raw_omitted;
  out->raw_omitted = !full;
  for (uint64_t id = 0; id < kBuiltinColumns; ++id) {
    if (chunks[id].id != id) return false;
  }
  out->event_count = n;
  if (order) {
    if (!chunks[kTimestamps].loaded || !chunks[kPositions].loaded) return false;
    if (!DecodeDeltas(chunks[kTimestamps].data, n, &out->timestamps, min_ts, max_ts) ||
        !DecodePositions(chunks[kPositions].data, n, &out->positions))
      return false;
  } else {
    out->timestamps.clear();
    out->positions.clear();
  }
  if (chunks[kIngest].loaded) {
    int64_t lo, hi;
    if (!DecodeDeltas(chunks[kIngest].data, n, &out->ingest_ts, &lo, &hi)) return false;
  } else {
    out->ingest_ts.assign(n, 0);
  }

  // Field columns.
  std::vector<ParsedColumn>& cols = tls_columns;
  size_t ncols = 0;
  uint64_t int_values = 0;
  for (size_t k = kBuiltinColumns; k < chunks.size(); ++k) {
    const Chunk& ch = chunks[k];
    if (!ch.loaded) {
      if (full) return false;
      continue;
    }
    if (ch.id < kFirstField || ch.id - kFirstField >= names.size()) return false;
    if (ncols == cols.size()) cols.emplace_back();
    ParsedColumn& col = cols[ncols++];
    col.id = ch.id;
    col.name = names[ch.id - kFirstField];
    col.next = 0;
    col.prefix = 0;
    if (!ParseField(ch, n, /*ids_only=*/!full, &col)) return false;
    int_values += col.ints.size();
  }
  // Render integer values as text (views into value_text, sized once).
  out->value_text.resize(int_values * kMaxIntText);
  {
    char* p = out->value_text.data();
    for (size_t k = 0; k < ncols; ++k) {
      ParsedColumn& col = cols[k];
      if (col.ints.empty()) continue;
      col.values.resize(col.ints.size());
      for (size_t j = 0; j < col.ints.size(); ++j) {
        auto [q, ec] = std::to_chars(p, p + kMaxIntText, col.ints[j]);
        if (ec != std::errc()) return false;
        col.values[j] = std::string_view(p, static_cast<size_t>(q - p));
        p = q;
      }
    }
  }
  out->field_names.resize(ncols);
  for (size_t k = 0; k < ncols; ++k) out->field_names[k] = cols[k].name;
  out->field_names_complete = true;

  out->field_begin.resize(n + 1);
  out->raw.resize(n);
  out->dict_columns.clear();
  if (!full) {
    // Dictionary columns with at most one value per event are handed over as such; the other
    // selected columns go to `fields`.
    size_t nrows = 0;
    for (size_t k = 0; k < ncols; ++k) {
      ParsedColumn& col = cols[k];
      if (!col.ids_only) {
        if (nrows != k) std::swap(cols[nrows], col);
        ++nrows;
        continue;
      }
      DecodedBlock::DictColumn& d = out->dict_columns.emplace_back();
      d.name = col.name;
      d.values.swap(col.dict);
      if (col.one_each) {
        d.ids.swap(col.dict_ids);
      } else {
        d.ids.assign(n, DecodedBlock::kNoValue);
        size_t j = 0;
        for (size_t i = 0; i < n; ++i) {
          if (col.counts[i] != 0) d.ids[i] = col.dict_ids[j++];
        }
      }
    }
    if (!raw_views_empty) std::fill(out->raw.begin(), out->raw.end(), std::string_view());
    out->raw_text.clear();
    if (nrows == 0) {
      std::fill(out->field_begin.begin(), out->field_begin.end(), 0);
      out->fields.clear();
      return true;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      out->field_begin[i] = static_cast<uint32_t>(total);
      for (size_t k = 0; k < nrows; ++k) total += cols[k].counts[i];
    }
    out->field_begin[n] = static_cast<uint32_t>(total);
    out->fields.resize(total);
    size_t f = 0;
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < nrows; ++k) {
        ParsedColumn& col = cols[k];
        for (uint32_t r = 0; r < col.counts[i]; ++r) {
          out->fields[f++] = FieldView{col.name, col.values[col.next++]};
        }
      }
    }
    return true;
  }

  // Full decode, one pass over the events: each event's fields in layout order, then its
  // @rawstring from its template (reading the fields just placed, still in cache).
  if (!chunks[kLayout].loaded || !chunks[kRaw].loaded) return false;
  // Column index by field name id (-1: no column of that id in the block). The table stays all
  // -1 between calls: only this block's entries are set, and reset on every way out.
  std::vector<int32_t>& slot = tls_slots;
  if (slot.size() < names.size()) slot.resize(names.size(), -1);
  for (size_t k = 0; k < ncols; ++k) slot[cols[k].id - kFirstField] = static_cast<int32_t>(k);
  struct Reset {
    std::vector<int32_t>& slot;
    const std::vector<ParsedColumn>& cols;
    size_t ncols;
    ~Reset() {
      for (size_t k = 0; k < ncols; ++k) slot[cols[k].id - kFirstField] = -1;
    }
  } reset{slot, cols, ncols};
  Cursor lc{chunks[kLayout].data.data(), chunks[kLayout].data.data() + chunks[kLayout].data.size()};
  uint64_t total_fields = 0;
  for (size_t k = 0; k < ncols; ++k) total_fields += cols[k].values.size();
  if (total_fields > chunks[kLayout].data.size()) return false;
  out->fields.resize(total_fields);
  FieldView* const fields = out->fields.data();

  const std::string_view data = chunks[kRaw].data;
  Cursor rc{data.data(), data.data() + data.size()};
  const uint64_t meta = rc.V();
  if (!rc.ok || meta > rc.left()) return false;
  const char* literal = rc.p + meta;
  const char* const literal_end = rc.end;
  rc.end = literal;
  std::vector<uint64_t>& lens = tls_lengths;
  lens.resize(n);
  uint64_t total_raw = 0;
  for (size_t i = 0; i < n; ++i) {
    lens[i] = rc.V();
    if (lens[i] > raw_bytes - total_raw) return false;
    total_raw += lens[i];
  }
  if (total_raw != raw_bytes) return false;
  if (ncols == 0) {
    // A block without field columns: every event's layout count and reference count is 0, one
    // zero byte each (the writer's encoding; anything else is corrupt), and its raw strings are
    // the literal run itself, consecutive, viewed in place instead of copied.
    const std::string_view layout = chunks[kLayout].data;
    if (layout.size() != n || !AllZero(layout)) return false;
    if (!rc.ok || static_cast<size_t>(rc.end - rc.p) != n || !AllZero({rc.p, n})) return false;
    if (total_raw != static_cast<uint64_t>(literal_end - literal)) return false;
    out->raw_text.clear();
    std::fill(out->field_begin.begin(), out->field_begin.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      out->raw[i] = std::string_view(literal, lens[i]);
      literal += lens[i];
    }
    return true;
  }
  out->raw_text.resize(total_raw);
  char* dst = out->raw_text.data();

  size_t f = 0;
  for (size_t i = 0; i < n; ++i) {
    // Fields [fb, fe) of event i, in layout order.
    const size_t fb = f;
    out->field_begin[i] = static_cast<uint32_t>(fb);
    const uint64_t count = lc.V();
    if (count > total_fields - f) return false;
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t name = lc.V();
      if (name >= names.size() || slot[name] < 0) return false;
      ParsedColumn& col = cols[static_cast<size_t>(slot[name])];
      if (col.next >= col.values.size()) return false;
      fields[f++] = FieldView{col.name, col.values[col.next++]};
    }
    // Every column gave exactly its count for this event.
    for (size_t k = 0; k < ncols; ++k) {
      cols[k].prefix += cols[k].counts[i];
      if (cols[k].next != cols[k].prefix) return false;
    }
    const size_t fe = f;

    // @rawstring: literal gaps and references to the event's fields.
    const uint64_t nrefs = rc.V();
    if (!rc.ok || nrefs > fe - fb) return false;
    char* const start = dst;
    uint64_t room = lens[i];
    uint64_t at = 0;  // the event's next field slot
    for (uint64_t r = 0; r < nrefs; ++r) {
      const uint64_t gap = rc.V();
      const uint64_t skip = rc.V();
      if (gap > room || gap > static_cast<uint64_t>(literal_end - literal)) return false;
      CopyBytes(dst, literal, gap);
      dst += gap;
      literal += gap;
      room -= gap;
      if (skip >= fe - fb - at) return false;
      at += skip;
      const std::string_view v = fields[fb + at].value;
      ++at;
      if (v.size() > room) return false;
      CopyBytes(dst, v.data(), v.size());
      dst += v.size();
      room -= v.size();
    }
    if (room > static_cast<uint64_t>(literal_end - literal)) return false;
    CopyBytes(dst, literal, room);
    dst += room;
    literal += room;
    out->raw[i] = std::string_view(start, lens[i]);
  }
  out->field_begin[n] = static_cast<uint32_t>(f);
  if (!lc.ok || lc.p != lc.end || f != total_fields) return false;
  if (!rc.ok || rc.p != rc.end || literal != literal_end) return false;
  return true;
}

}  // namespace sediment::segment_v2
