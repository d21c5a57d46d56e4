#include "query/record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <tuple>
#include <utility>

namespace sediment::query {
namespace {

bool IsBuiltin(std::string_view name) {
  return name == "@timestamp" || name == "@rawstring" || name == "@id" ||
         name == "@ingesttimestamp" || name == "#repo";
}

Value* FindIn(Row& row, std::string_view name) {
  for (auto& [k, v] : row) {
    if (k == name) return &v;
  }
  return nullptr;
}
const Value* FindIn(const Row& row, std::string_view name) {
  for (const auto& [k, v] : row) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

std::string ValueToString(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  const double d = std::get<double>(v);
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(d));
  }
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  if (ec != std::errc()) {
    std::snprintf(buf, sizeof(buf), "%.17g", d);
    return buf;
  }
  return std::string(buf, p);
}

std::optional<double> ParseNumber(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;  // from_chars takes '-' but not '+'
  // A decimal number only: from_chars alone would also take "inf", "nan" and "+-1".
  const char* digits = b == s.data() && *b == '-' ? b + 1 : b;
  if (digits == e || !((*digits >= '0' && *digits <= '9') || *digits == '.')) {
    return std::nullopt;
  }
  double out = 0;
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc() || p != e) return std::nullopt;
  return out;
}

std::optional<double> ValueToNumber(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return ParseNumber(std::get<std::string>(v));
}

int CompareValues(const Value& a, const Value& b) {
  const auto* ia = std::get_if<int64_t>(&a);
  const auto* ib = std::get_if<int64_t>(&b);
  if (ia && ib) return *ia < *ib ? -1 : (*ia > *ib ? 1 : 0);
  std::optional<double> na = ValueToNumber(a), nb = ValueToNumber(b);
  if (na && nb) return *na < *nb ? -1 : (*na > *nb ? 1 : 0);
  // Numbers order before text, so the order is total on mixed columns.
  if (na) return -1;
  if (nb) return 1;
  std::string sa = ValueToString(a), sb = ValueToString(b);
  return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

bool IsEventField(std::string_view name) {
  if (name.empty()) return true;
  if (name[0] == '#') return false;
  return !(name == "@rawstring" || name == "@timestamp" || name == "@ingesttimestamp" ||
           name == "@id");
}

Record::Record(const EventRef& ev) { ResetToEvent(ev); }

void Record::ResetToEvent(const EventRef& ev) {
  ev_ = ev;
  const DecodedBlock& b = *ev.block;
  key_.partition = ev.partition.value;
  if (b.timestamps.empty()) {
    // Read without order (ColumnSelection::order): no stage reads the key.
    key_.ts = 0;
    key_.offset = 0;
    key_.index = 0;
  } else {
    key_.ts = b.timestamps[ev.index];
    key_.offset = b.positions[ev.index].offset.value;
    key_.index = b.positions[ev.index].index;
  }
  row_.clear();
  removed_.clear();
}

Record Record::FromRow(Row row, RecordKey key) {
  Record r;
  r.row_ = std::move(row);
  r.key_ = key;
  return r;
}

bool Record::Removed(std::string_view name) const {
  return std::find(removed_.begin(), removed_.end(), name) != removed_.end();
}

std::optional<std::string_view> Record::EventGet(std::string_view name,
                                                 std::string* scratch) const {
  const DecodedBlock& b = *ev_.block;
  const size_t i = ev_.index;
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
      *scratch = FormatEventId(ev_.partition, b.positions[i]);
      return std::string_view(*scratch);
    }
  } else if (!name.empty() && name[0] == '#') {
    for (const auto& [k, val] : ev_.ds->tags) {
      if (k == name) return std::string_view(val);
    }
    if (name == "#repo") return std::string_view(ev_.ds->repo);
    return std::nullopt;
  }
  return b.FieldValue(i, name);
}

std::optional<std::string_view> Record::Get(std::string_view name, std::string* scratch) const {
  if (const Value* v = FindIn(row_, name)) {
    if (const auto* s = std::get_if<std::string>(v)) return std::string_view(*s);
    *scratch = ValueToString(*v);
    return std::string_view(*scratch);
  }
  if (!is_event() || (!removed_.empty() && Removed(name))) return std::nullopt;
  return EventGet(name, scratch);
}

std::optional<Value> Record::GetValue(std::string_view name) const {
  if (const Value* v = FindIn(row_, name)) return *v;
  if (!is_event() || (!removed_.empty() && Removed(name))) return std::nullopt;
  if (name == "@timestamp") return Value(ev_.block->timestamps[ev_.index]);
  if (name == "@ingesttimestamp") return Value(ev_.block->ingest_ts[ev_.index]);
  std::string scratch;
  auto s = EventGet(name, &scratch);
  if (!s) return std::nullopt;
  return Value(std::string(*s));
}

std::optional<double> Record::GetNumber(std::string_view name) const {
  if (const Value* v = FindIn(row_, name)) return ValueToNumber(*v);
  std::string scratch;
  auto s = Get(name, &scratch);
  if (!s) return std::nullopt;
  return ParseNumber(*s);
}

bool Record::Has(std::string_view name) const {
  std::string scratch;
  return Get(name, &scratch).has_value();
}

void Record::Set(std::string_view name, Value value) {
  if (Value* v = FindIn(row_, name)) {
    *v = std::move(value);
    return;
  }
  if (!removed_.empty()) {
    removed_.erase(std::remove(removed_.begin(), removed_.end(), name), removed_.end());
  }
  row_.emplace_back(std::string(name), std::move(value));
}

void Record::SetText(std::string_view name, std::string_view text) {
  if (HoldsBytesOf(text)) {
    // Adding a field may move the bytes `text` points to: copy them first.
    Set(name, Value(std::string(text)));
    return;
  }
  if (Value* v = FindIn(row_, name)) {
    if (auto* s = std::get_if<std::string>(v)) {
      s->assign(text);
    } else {
      *v = std::string(text);
    }
    return;
  }
  if (!removed_.empty()) {
    removed_.erase(std::remove(removed_.begin(), removed_.end(), name), removed_.end());
  }
  row_.emplace_back(std::piecewise_construct, std::forward_as_tuple(name),
                    std::forward_as_tuple(std::in_place_type<std::string>, text));
}

bool Record::HoldsBytesOf(std::string_view text) const {
  const uintptr_t b = reinterpret_cast<uintptr_t>(text.data());
  for (const auto& [k, v] : row_) {
    const auto* s = std::get_if<std::string>(&v);
    if (s == nullptr) continue;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(s->data());
    if (b >= lo && b + text.size() <= lo + s->size()) return true;
  }
  return false;
}

void Record::Remove(std::string_view name) {
  row_.erase(
      std::remove_if(row_.begin(), row_.end(), [&](const auto& kv) { return kv.first == name; }),
      row_.end());
  if (is_event() && !Removed(name)) {
    std::string scratch;
    if (EventGet(name, &scratch)) removed_.emplace_back(name);
  }
}

Row Record::ToRow() const {
  if (!is_event()) return row_;
  const DecodedBlock& b = *ev_.block;
  const size_t i = ev_.index;
  Row r;
  r.reserve(5 + ev_.ds->tags.size() + b.FieldCount(i) + row_.size());
  std::vector<uint8_t> used(row_.size(), 0);
  auto add = [&](std::string_view name, Value v) {
    if (!removed_.empty() && Removed(name)) return;
    for (size_t k = 0; k < row_.size(); ++k) {
      if (row_[k].first == name) {
        used[k] = 1;
        r.emplace_back(std::string(name), row_[k].second);
        return;
      }
    }
    r.emplace_back(std::string(name), std::move(v));
  };
  add("@timestamp", b.timestamps[i]);
  add("@rawstring", std::string(b.raw[i]));
  add("@id", FormatEventId(ev_.partition, b.positions[i]));
  add("@ingesttimestamp", b.ingest_ts[i]);
  add("#repo", ev_.ds->repo);
  for (const auto& [k, val] : ev_.ds->tags) {
    if (!IsBuiltin(k)) add(k, val);
  }
  b.ForEachField(i, [&](std::string_view name, std::string_view value) {
    if (IsBuiltin(name) || (!name.empty() && name[0] == '#')) return;
    add(name, std::string(value));
  });
  for (size_t k = 0; k < row_.size(); ++k) {
    if (!used[k]) r.push_back(row_[k]);
  }
  return r;
}

void Record::Materialize() {
  if (!is_event()) return;
  row_ = ToRow();
  removed_.clear();
  ev_ = EventRef{};
}

size_t Record::MemoryBytes() const {
  size_t n = sizeof(Record);
  for (const auto& [k, v] : row_) {
    n += sizeof(k) + sizeof(v) + k.size();
    if (const auto* s = std::get_if<std::string>(&v)) n += s->size();
  }
  for (const auto& s : removed_) n += sizeof(s) + s.size();
  return n;
}

}  // namespace sediment::query
