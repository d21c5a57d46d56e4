// A block-at-a-time path for a regex() whose groups are only counted: `regex(...) | groupBy(g)`
// (or top(g)) with count() metrics. Each event's group value is taken straight from its raw
// string and counted, without building a record or setting fields, with exactly the result of
// the per-record path (ApplyRegex, then Collector::Add).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "query/aggregate.h"
#include "query/compiled.h"
#include "query/simple_regex.h"
#include "segment/segment.h"

namespace sediment::query {

// Thread-compatible: one per scan worker.
class RegexGroupCounter {
 public:
  // Null unless stages [0, collect) of `q` are exactly one strict, non-repeating regex() over
  // @rawstring and `c` counts by one of its named groups (Collector::CountsByField).
  static std::unique_ptr<RegexGroupCounter> For(const CompiledQuery& q, size_t collect,
                                                const Collector& c);

  // Counts into `c` the events i of `block` with matched[i] != 0, as the regex stage and c.Add
  // would; an event whose outcome the counter cannot decide (the counted group did not take part
  // in the match) is handed to `slow(i)`, in event order, which must run it through the records.
  // Returns false, having done nothing, when the block has no raw strings.
  bool Run(const DecodedBlock& block, const std::vector<uint8_t>& matched, Collector& c,
           const std::function<void(size_t)>& slow);
  // Whether Run searches runs of events laid out back to back as one text (see scan_).
  bool scans() const { return scan_; }

 private:
  RegexGroupCounter(const Stage* st, int capture);
  // Events [begin, end) of `raw`, laid out back to back, with one search for the stage's prefix
  // over all their bytes (see scan_).
  void ScanRun(const std::vector<std::string_view>& raw, size_t begin, size_t end,
               const std::vector<uint8_t>& matched, Collector& c,
               const std::function<void(size_t)>& slow);
  void Count(std::string_view key, Collector& c);
  // Count when `key` (packed as `w`) is not the value counted last.
  void CountSlow(std::string_view key, uint64_t w, Collector& c);
  void Flush(Collector& c);

  const Stage* st_;  // the regex stage, owned by the query
  int capture_;      // capture index of the counted group in st_->re
  // True when the stage's SimpleRegex is fixed (SimpleRegex::fixed) and every match starts with
  // its non-empty prefix, with no prefilter: then the leftmost match in an event is at the first
  // place where the prefix occurs inside the event and MatchAt matches, and a run of events laid
  // out back to back is searched for the prefix as one text, not event by event.
  bool scan_ = false;
  std::vector<SimpleRegex::Span> caps_;  // scan_: MatchAt's spans
  // One distinct group value of the block: its text (pointing into the block), its bytes and
  // size in one word when it has at most 7 bytes (compared as one integer; else kNotPacked in
  // regex_count.cc), and its count.
  struct Key {
    std::string_view value;
    uint64_t word = 0;
    uint64_t count = 0;
  };
  // The block's values in order of first appearance; handed to the collector at the end of the
  // block or when full.
  std::vector<Key> keys_;
  size_t last_ = 0;  // index in keys_ of the last value counted (when keys_ is not empty)
};

}  // namespace sediment::query
