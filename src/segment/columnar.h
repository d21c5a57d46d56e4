// Format 2 block content (FORMAT.md "Format 2"): the column chunks of one block, before
// compression. Internal to the segment library: segment.cc does the file I/O, checksums and
// compression; this file turns events into uncompressed chunks and chunks back into a
// DecodedBlock. Not thread-safe per object; the free functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/event.h"
#include "segment/segment.h"

namespace sediment::segment_v2 {

// Column ids: the built-in columns, then field name k of the segment's name table as
// kFirstField + k.
inline constexpr uint64_t kTimestamps = 0;
inline constexpr uint64_t kIngest = 1;
inline constexpr uint64_t kPositions = 2;
inline constexpr uint64_t kLayout = 3;
inline constexpr uint64_t kRaw = 4;
inline constexpr uint64_t kFirstField = 5;
inline constexpr uint64_t kBuiltinColumns = 5;

// How a field column's values are stored (a built-in column always uses kPlain).
enum Encoding : uint8_t { kPlain = 0, kDict = 1, kInt = 2 };

// One column of a block as the writer produced it (uncompressed).
struct EncodedColumn {
  uint64_t id = 0;
  Encoding encoding = kPlain;
  std::string data;
  int64_t min = 0, max = 0;  // kInt only: the smallest and largest value
};

// Hash of a string for the encoder's maps (XXH3; looked up by std::string_view without a copy).
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const;
};

// The segment's field names in id order, with the reverse map. Grows as blocks are encoded.
class NameTable {
 public:
  uint64_t Id(std::string_view name);
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, uint64_t, TextHash, std::equal_to<>> ids_;
  std::vector<std::string> names_;
};

// Encodes events [ev, ev + n) (n >= 1, positions strictly increasing) into `out`: the five
// built-in columns in id order, then one column per field name present, in increasing id order.
// Reusable across blocks.
class BlockEncoder {
 public:
  // `unreferenced` (when not null) is cleared and gets every field value that is not a
  // substring of its event's @rawstring as far as the template found: the values whose text the
  // block filter needs besides the raw strings (every gram of a substring is a gram of the
  // string). Views into the events.
  void Encode(const PositionedEvent* ev, size_t n, NameTable* names,
              std::vector<EncodedColumn>* out,
              std::vector<std::string_view>* unreferenced = nullptr);

 private:
  struct FieldColumn {
    std::vector<uint32_t> counts;  // per event
    std::vector<std::string_view> values;
  };
  std::vector<FieldColumn> columns_;  // by field id (NameTable); only the ids in use are filled
  // Field slot k of the event before: its name and id. Events of one source mostly repeat their
  // field names in the same order, so a name equal to the cached one skips the NameTable lookup.
  // Views into the events being encoded: valid during one Encode call only.
  std::vector<std::pair<std::string_view, uint64_t>> slot_ids_;
  // Dictionary scratch: distinct values to their index, the distinct values, each value's index.
  std::unordered_map<std::string_view, uint32_t, TextHash> dict_;
  std::vector<std::string_view> dict_list_;
  std::vector<uint32_t> dict_ids_;
  std::vector<int64_t> ints_;
};

// A column chunk handed to the decoder: its id and encoding from the footer, and its
// decompressed bytes (empty view = not loaded).
struct Chunk {
  uint64_t id = 0;
  Encoding encoding = kPlain;
  std::string_view data;
  bool loaded = false;
};

// Decodes a block from its chunks into `out` (views point into the chunks, out->raw_text and
// out->value_text; out->event_count = event_count). `chunks` lists the block's columns in footer
// order; with `order` the built-in timestamps and positions chunks must be loaded and are
// decoded, without it they are not looked at and out->timestamps / out->positions come out empty
// (*min_ts / *max_ts untouched); with `full` the layout, @rawstring and every field chunk must be
// loaded and raw strings and field order are reconstructed (the raw strings must add up to
// exactly `raw_bytes`; a block without field columns has its raw views point into the
// @rawstring chunk, consecutively, and out->raw_text is left empty), otherwise only the loaded
// field columns are decoded (fields in chunk order) and raw views are empty
// (out->raw_omitted says which). `names` is the segment's name table.
// Every length, count and reference is checked: any inconsistency is false (the caller reports
// Corruption) with `out` unspecified. Allocations are bounded by the chunks' sizes and
// `raw_bytes`.
// The ingest-time chunk may be left unloaded: ingest_ts is then all zeros.
// Positions come out strictly increasing (the encoding cannot express anything else);
// *min_ts / *max_ts get the smallest and largest @timestamp.
bool DecodeBlock(uint32_t event_count, const std::vector<Chunk>& chunks,
                 const std::vector<std::string>& names, bool full, bool order, uint64_t raw_bytes,
                 DecodedBlock* out, int64_t* min_ts, int64_t* max_ts);

}  // namespace sediment::segment_v2
