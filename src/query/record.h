// A record flowing through a query pipeline: either a view of one event of a decoded block (its
// fields read in place, no copy) with an overlay of the fields later stages set or removed, or a
// free-standing row (what aggregates emit, or a materialized event).
//
// Ownership: an event record points into a DecodedBlock and a Datasource that must outlive it;
// collectors that keep records past the current block call ToRow() (or Materialize()). Not
// thread-safe; records are used by one worker at a time.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "model/event.h"
#include "query/query.h"
#include "segment/segment.h"

namespace sediment::query {

// Where an event sits in a decoded block.
struct EventRef {
  const DecodedBlock* block = nullptr;
  const Datasource* ds = nullptr;
  PartitionId partition;
  size_t index = 0;
};

// Order of records: events by (@timestamp, partition, offset, index); rows by their input order
// (ts = 0, offset = sequence number). An event of a block read without @timestamp and positions
// (ColumnSelection::order false, only when no stage reads the key) has ts = offset = index = 0.
struct RecordKey {
  int64_t ts = 0;
  int32_t partition = 0;
  int64_t offset = 0;
  uint32_t index = 0;
  auto operator<=>(const RecordKey&) const = default;
};

class Record {
 public:
  Record() = default;
  explicit Record(const EventRef& ev);
  // Makes this the record of event `ev`, as Record(ev) does, keeping the memory of its fields for
  // reuse (also valid on a moved-from record).
  void ResetToEvent(const EventRef& ev);
  static Record FromRow(Row row, RecordKey key);

  bool is_event() const { return ev_.block != nullptr; }
  const EventRef& event() const { return ev_; }
  const RecordKey& key() const { return key_; }
  void set_key(const RecordKey& k) { key_ = k; }

  // Value of `name` as text (integers in decimal, doubles shortest round-trip), nullopt when
  // absent. Event built-ins: @rawstring, @timestamp, @ingesttimestamp, @id, #repo, tags.
  // The view is valid until the record changes or `*scratch` is reused.
  std::optional<std::string_view> Get(std::string_view name, std::string* scratch) const;
  // Typed value when the record holds one (rows from aggregates; @timestamp and
  // @ingesttimestamp of events are int64), else the text as a string. nullopt when absent.
  std::optional<Value> GetValue(std::string_view name) const;
  // Number when the value is numeric or text that parses fully as a number.
  std::optional<double> GetNumber(std::string_view name) const;
  bool Has(std::string_view name) const;

  // Sets (adds or replaces) a field. Setting a built-in of an event (@rawstring, @timestamp,
  // ...) overrides it in this record.
  void Set(std::string_view name, Value value);
  // Set(name, Value(std::string(text))) without the intermediate strings: the text is copied
  // once, into the field's existing string when it has one. `text` may be any view, also one
  // into this record's own values.
  void SetText(std::string_view name, std::string_view text);
  void Remove(std::string_view name);
  // Whether `text` lies inside a value this record holds itself (a field a stage set, or any
  // field of a row): those bytes may move or be freed by the next Set or Remove. Views into the
  // decoded block, the datasource or a caller's scratch never do.
  bool HoldsBytesOf(std::string_view text) const;

  // All visible fields, in output order: for an event the built-ins (@timestamp, @rawstring,
  // @id, @ingesttimestamp, #repo), tags, the event's fields, each replaced in place when a stage
  // set it, minus removed ones, then fields added by stages in the order they were added.
  Row ToRow() const;
  // Turns an event record into a row record with the same fields and key (drops the block
  // reference).
  void Materialize();
  // Approximate bytes held (for memory bounds).
  size_t MemoryBytes() const;

 private:
  std::optional<std::string_view> EventGet(std::string_view name, std::string* scratch) const;
  bool Removed(std::string_view name) const;

  EventRef ev_;
  RecordKey key_;
  Row row_;                           // a row's fields, or an event's overrides and additions
  std::vector<std::string> removed_;  // event fields removed by stages
};

// Whether Record::Get of an event looks `name` up among the event's fields (false for tags and
// the built-ins @rawstring, @timestamp, @ingesttimestamp and @id).
bool IsEventField(std::string_view name);

// Text form of a value (integers in decimal, doubles with up to 17 significant digits, no
// trailing ".0" for whole doubles below 2^53).
std::string ValueToString(const Value& v);
// A number when `v` is numeric or text that parses fully as a decimal number (leading '+'
// allowed); nullopt otherwise.
std::optional<double> ValueToNumber(const Value& v);
std::optional<double> ParseNumber(std::string_view s);
// Total order used by sort(): numeric when both values are numbers, numbers before text, text
// bytewise.
int CompareValues(const Value& a, const Value& b);

}  // namespace sediment::query
