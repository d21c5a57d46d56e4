// Collectors: the partial state of a collecting stage (Stage::IsTransform() is false: head,
// tail, sort, table and every aggregate), plus the implicit event collector of a non-aggregate
// query. The executor keeps one collector per worker thread, merges them, and in a cluster the
// nodes that read the data send their encoded collectors to the coordinator, which decodes and
// merges them and calls Finish once.
//
// Thread-safety: a collector is used by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"

namespace sediment::query {

struct CollectorContext {
  TimeRange range;  // the query's time range (timeChart/bucket span choice and empty buckets)
  // The implicit event collector keeps at most this many (the newest).
  size_t max_events = 200000;
};

class Collector {
 public:
  virtual ~Collector() = default;
  // Adds one record. The record may point into a block that is reused after the call: keep
  // only copies (Record::ToRow). Never fails on data.
  virtual void Add(const Record& r) = 0;
  // Block-at-a-time shortcut for events no stage changed: adds the events i of `block` with
  // matched[i] != 0 exactly as Add would add their records, when this collector can do so from
  // the block's columns alone (counts in total, by time bucket, or by a dictionary column).
  // Returns false, having added nothing, when it cannot; the caller then adds the records one by
  // one.
  virtual bool AddBlock(const DecodedBlock& block, const std::vector<uint8_t>& matched) {
    return false;
  }
  // Adds `n` unchanged events when the stage only counts its records in total (count() and
  // other plain counts without grouping), so that whole blocks can be counted from the segment
  // index without being read. Returns false, adding nothing, otherwise (n = 0 probes).
  virtual bool AddCount(uint64_t n) { return false; }
  // The one field that alone decides what Add does with a record, when this collector only
  // counts records by its value (groupBy()/top() on one field with count() metrics): adding `n`
  // records whose field is `v` is then AddKeyCount(v, n). Empty otherwise.
  virtual std::string CountsByField() const { return {}; }
  // Adds `n` records whose CountsByField() has the value `key`, exactly as `n` calls of Add
  // would. Only called when CountsByField() is not empty.
  virtual void AddKeyCount(std::string_view key, uint64_t n) {}
  // A field without which an unchanged event adds nothing (it joins no group, as AddBlock and Add
  // agree), so a block none of whose events has it may be passed over unread; empty when any
  // event may add something.
  virtual std::string ContributingField() const { return {}; }
  // For stages that keep the N newest (tail) or oldest (head) records: +1 or -1, else 0.
  virtual int KeepsByTime() const { return 0; }
  // When KeepsByTime() != 0 and the collector is full: the @timestamp of the least wanted record
  // it keeps. An event strictly older (tail) or newer (head) than it can no longer be kept, so a
  // scan of unchanged events may skip blocks wholly beyond it.
  virtual std::optional<int64_t> TimeCut() const { return std::nullopt; }
  // Folds `other` (a collector of the same stage and context) into this one; `other` is left
  // in an unspecified state.
  virtual void Merge(Collector& other) = 0;
  // Finish followed by `next`, the collecting stage right after this one (which would take the
  // rows Finish returns, in their order), when this collector can give `next`'s output without
  // building every row: the rows and warnings are exactly those of Finish and then `next` over
  // them. Returns nullopt, having done nothing, when it cannot (the caller then calls Finish).
  // Called at most once, instead of Finish.
  virtual std::optional<std::vector<Row>> FinishThrough(const Stage& next,
                                                        std::vector<std::string>* warnings) {
    return std::nullopt;
  }
  // Approximate bytes held, for the query memory bound.
  virtual size_t MemoryBytes() const = 0;
  // Appends the state to `out` (see WIRE.md, "collector states"). Deterministic.
  virtual void Encode(std::string* out) const = 0;
  // The stage's output rows, in the order the stage defines, and the keys the next stage orders
  // them by (RecordKey with offset = row number). Notices (limits cutting groups, rows or
  // events) are appended to `warnings`. Called once.
  virtual std::vector<Row> Finish(std::vector<std::string>* warnings) = 0;
};

// A fresh collector for `st` (!st.IsTransform()).
std::unique_ptr<Collector> NewCollector(const Stage& st, const CollectorContext& ctx);
// The collector a non-aggregate query ends with: the newest ctx.max_events records, output in
// ascending key order, with a warning "results limited to the newest N of M matching events"
// when it cut.
std::unique_ptr<Collector> NewEventCollector(const CollectorContext& ctx);
// Decodes what Encode wrote, for the same stage (`st` null: the event collector). Corruption on
// any inconsistency (never crashes on bad bytes).
Result<std::unique_ptr<Collector>> DecodeCollector(const Stage* st, const CollectorContext& ctx,
                                                   std::string_view bytes);

}  // namespace sediment::query
