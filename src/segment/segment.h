// Segment files (DESIGN section 7): immutable, one datasource each, zstd-compressed blocks of
// events with per-block time/position ranges and token filters, a footer index and checksums.
// Exact byte layout: segment/FORMAT.md (format version 2, columnar; version 1 stays readable).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "model/event.h"

namespace sediment {

// Summary of a whole segment; stored in the footer and mirrored in Global.
struct SegmentInfo {
  Datasource datasource;
  PartitionId partition;
  Position min_pos, max_pos;       // inclusive position range of its events
  int64_t min_ts = 0, max_ts = 0;  // inclusive @timestamp range
  uint64_t event_count = 0;
  uint64_t raw_bytes = 0;     // sum of @rawstring sizes
  uint64_t file_size = 0;     // bytes of the file
  uint64_t content_hash = 0;  // XXH64 of the whole file but its last 8 bytes (see FORMAT.md)
};

struct BlockInfo {
  uint64_t file_offset = 0;
  uint32_t stored_size = 0;  // compressed bytes
  uint32_t raw_size = 0;     // uncompressed bytes
  uint32_t event_count = 0;
  int64_t min_ts = 0, max_ts = 0;
  Position min_pos, max_pos;
  // Sum of the block's @rawstring sizes; format 2 only (0 in format 1, where every read decodes
  // the raw strings).
  uint64_t raw_bytes = 0;
};

struct SegmentWriterOptions {
  // 2 (columnar, the default) or 1 (kept so tests and tools can write the old layout).
  uint32_t format_version = 2;
  size_t block_raw_bytes = 1 << 20;  // target uncompressed block size
  // zstd level of the @rawstring column (and of a whole format 1 block): the column that free
  // text and regex decompress most, so its level buys decompression speed as well as size.
  int zstd_level = 6;
  // zstd level of every other format 2 column chunk (timestamps, positions, layout, fields):
  // small columns where a higher level saves few bytes and costs ingest CPU (FORMAT.md).
  int column_zstd_level = 3;
  // Block filter sizing (FORMAT.md "Block filter"): bits per distinct trigram and probes per gram.
  // filter_hashes = 0 writes no filters (every block then passes BlockMayContainAll).
  double filter_bits_per_gram = 6.0;
  int filter_hashes = 2;
};

// Writes `events` (sorted by position, all of `ds` on `partition`, non-empty) to `path`, fsyncs it
// and returns its info. The file is written under a temporary name and renamed, so `path` either
// does not exist or is complete.
Result<SegmentInfo> WriteSegment(Env* env, const std::string& path, const Datasource& ds,
                                 PartitionId partition, const std::vector<PositionedEvent>& events,
                                 const SegmentWriterOptions& options = {});

// Writes `events` to `path` itself (created or truncated), fsyncs and closes it: no temporary name,
// no rename, no directory fsync; the caller publishes the file (SegmentStore::Create writes a
// temporary name and renames it). Same argument rules as WriteSegment. On error `path` is removed.
Result<SegmentInfo> WriteSegmentFile(Env* env, const std::string& path, const Datasource& ds,
                                     PartitionId partition,
                                     const std::vector<PositionedEvent>& events,
                                     const SegmentWriterOptions& options = {});

// A format 2 block as stored: its column chunks, still compressed, for copying it into another
// segment without decoding its field columns (SegmentReader::ReadStoredBlock,
// SegmentFileWriter::AddStoredBlock; a merge copies its inputs' full blocks this way). When
// filled by ReadStoredBlock every chunk's CRC32C has been verified, and the timestamps and
// positions decoded and checked against `info` (ordered, matching its ranges and event count).
// Reusable across calls (keeps its capacity).
struct StoredBlock {
  BlockInfo info;  // as in the source's index (file_offset is the source's)
  struct Column {
    uint64_t id = 0;   // the source's column id (FORMAT.md "Format 2")
    std::string name;  // field columns: the field name; empty for the five built-in columns
    uint8_t codec = 0;
    uint8_t encoding = 0;
    uint32_t stored_size = 0, raw_size = 0;
    uint32_t crc = 0;          // CRC32C of the stored chunk
    int64_t min = 0, max = 0;  // integer-encoded columns: smallest and largest value
  };
  std::vector<Column> columns;  // in the source's order; their chunks lie back to back in `bytes`
  std::string bytes;
  std::string filter;         // the block's trigram filter (FORMAT.md "Block filter")
  uint8_t filter_hashes = 0;  // probes per gram; 0 = no filter
};

// Writes a segment file incrementally: events are added in position order and written a block at
// a time, so the writer holds about one block (`block_raw_bytes`) whatever the segment's size.
// Same bytes as WriteSegmentFile for the same events. Finish writes the footer, fsyncs and closes
// `path` (no rename: the caller publishes it). A writer destroyed before a successful Finish
// removes `path`. After any error the writer is unusable (every call returns that error). Not
// thread-safe.
class SegmentFileWriter {
 public:
  // Creates (truncates) `path`. InvalidArgument for options out of range.
  static Result<std::unique_ptr<SegmentFileWriter>> Create(
      Env* env, const std::string& path, const Datasource& ds, PartitionId partition,
      const SegmentWriterOptions& options = {});
  virtual ~SegmentFileWriter() = default;
  // InvalidArgument when `event` does not follow the previous one's position or is too large.
  [[nodiscard]] virtual Status Add(const PositionedEvent& event) = 0;
  // As Add for each of `events` in order (the same checks, blocks and bytes), without copying the
  // events of every block that lies wholly inside `events`: those are encoded in place during the
  // call. Only the events before the first such block (completing the block being filled) and
  // after the last one are copied. `events` need not outlive the call.
  [[nodiscard]] virtual Status AddAll(std::span<const PositionedEvent> events) = 0;
  // Events copied into the block being filled so far (Add copies each; AddAll see above).
  virtual uint64_t events_copied() const = 0;
  // Appends `block` (from ReadStoredBlock of a format 2 segment of the same datasource) as one
  // block of its own, after writing the events added so far as a block: its chunks are copied
  // as they are, except the layout chunk when the block's field names get other ids in this
  // file's name table (re-encoded with the new ids). Format 2 writers only (InvalidArgument
  // otherwise); InvalidArgument when the block's first position does not follow the previous
  // event's, or its field columns are malformed (ids not increasing, a name twice); Corruption
  // when its layout chunk does not decode. The copy keeps the source's compression and filter.
  [[nodiscard]] virtual Status AddStoredBlock(const StoredBlock& block) = 0;
  // InvalidArgument when no event was added.
  [[nodiscard]] virtual Result<SegmentInfo> Finish() = 0;
};

// A decoded block: events as views into the block's decompressed buffer, which it owns.
// Valid as long as the DecodedBlock lives; not thread-safe to mutate, safe to read concurrently.
struct FieldView {
  std::string_view name;
  std::string_view value;
};
struct DecodedBlock {
  std::string buffer;  // decompressed bytes; the views below point into it
  // Format 2: decompressed column chunks, @rawstrings reassembled from their template, and
  // integer values rendered as text; views below may point into any of them.
  std::vector<std::string> chunks;
  std::string raw_text;
  std::string value_text;
  std::vector<int64_t> timestamps;    // per event
  std::vector<int64_t> ingest_ts;     // per event
  std::vector<Position> positions;    // per event
  std::vector<std::string_view> raw;  // per event
  // True when the last read left out the raw strings (a format 2 partial read without
  // @rawstring): every `raw` view is empty. False after any read that decodes them (they may
  // point into `buffer`, `chunks` or `raw_text`) and by default.
  bool raw_omitted = false;
  // Fields of event i are fields[field_begin[i] .. field_begin[i+1]).
  std::vector<FieldView> fields;
  std::vector<uint32_t> field_begin;  // size = event count + 1
  // The block's field-name dictionary (every FieldView::name points into one of these). When
  // `field_names_complete`, it lists every name that occurs among the decoded fields and no
  // other (a segment read; a partial read lists the selected names present in the block), so a
  // decoded field that is not listed is absent from every event.
  std::vector<std::string_view> field_names;
  bool field_names_complete = false;
  bool HasFieldName(std::string_view name) const {
    return std::find(field_names.begin(), field_names.end(), name) != field_names.end();
  }
  // Format 2 partial reads only (empty otherwise): each selected dictionary-encoded field column
  // in which no event has more than one value, as its distinct values and, per event, the index
  // of the event's value (kNoValue: the event lacks the field). These fields' values are held
  // here only, not in `fields` (read an event's fields with ForEachField / FieldValue); a query
  // evaluates a column's distinct values once instead of once per event.
  struct DictColumn {
    std::string_view name;
    std::vector<std::string_view> values;
    std::vector<uint32_t> ids;  // per event
  };
  static constexpr uint32_t kNoValue = 0xffffffffu;
  std::vector<DictColumn> dict_columns;
  // The block's event count. Every reader sets it; `timestamps` and `positions` have this size
  // unless the read was asked for without them (ColumnSelection::order false), when they are
  // empty.
  size_t event_count = 0;
  // The dictionary column of field `name`, or nullptr.
  const DictColumn* FindDictColumn(std::string_view name) const {
    for (const DictColumn& c : dict_columns) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }
  size_t size() const { return event_count; }

  // Calls fn(name, value) for every decoded field value of event i: those in `fields` in their
  // order, then those of the dictionary columns.
  template <typename Fn>
  void ForEachField(size_t i, Fn&& fn) const {
    for (uint32_t f = field_begin[i]; f < field_begin[i + 1]; ++f)
      fn(fields[f].name, fields[f].value);
    for (const DictColumn& c : dict_columns) {
      if (c.ids[i] != kNoValue) fn(c.name, c.values[c.ids[i]]);
    }
  }
  // The number of decoded field values of event i.
  size_t FieldCount(size_t i) const {
    size_t k = field_begin[i + 1] - field_begin[i];
    for (const DictColumn& c : dict_columns) k += c.ids[i] != kNoValue;
    return k;
  }
  // The first decoded value of field `name` in event i, or nullopt.
  std::optional<std::string_view> FieldValue(size_t i, std::string_view name) const {
    if (const DictColumn* c = FindDictColumn(name)) {
      if (c->ids[i] == kNoValue) return std::nullopt;
      return c->values[c->ids[i]];
    }
    for (uint32_t f = field_begin[i]; f < field_begin[i + 1]; ++f) {
      if (fields[f].name == name) return fields[f].value;
    }
    return std::nullopt;
  }
};

// Which parts of a block a reader must decode. A reader may decode more than asked (format 1
// always decodes everything), never less: with `all` false, `raw` empty views mean "not decoded",
// `ingest_ts` is all zeros unless `ingest` (or raw) is asked for, `timestamps` and `positions` are
// empty when `order` is false (DecodedBlock::event_count still gives the event count), and
// `fields` holds, per event, the values of the named fields only (names in an unspecified order,
// the values of one name in the order they occur in the event).
// Without `order`, format 2 neither reads nor checks the block's timestamp and position chunks
// (the chunks it does read are still checksummed); a caller that needs no per-event time (a
// block wholly inside the query's range, a pipeline that never reads @timestamp, @id or the
// event order) saves their decode.
struct ColumnSelection {
  bool all = true;
  bool raw = false;                 // @rawstring (when !all)
  bool ingest = false;              // @ingesttimestamp (when !all)
  bool order = true;                // @timestamp and positions (when !all)
  std::vector<std::string> fields;  // field names (when !all); sorted, unique
};

// Reads one segment file. Open verifies the trailer and footer checksums; ReadBlock verifies the
// block's checksum. Every violation is a Corruption status naming the file and region; a reader
// never crashes and never returns events from a block that failed its checksum.
// Thread-safe after Open (reads use pread).
class SegmentReader {
 public:
  static Result<std::unique_ptr<SegmentReader>> Open(Env* env, const std::string& path);
  virtual ~SegmentReader() = default;

  virtual const SegmentInfo& info() const = 0;
  virtual const std::vector<BlockInfo>& blocks() const = 0;
  // False only when block i certainly holds no event containing every one of `terms` (each a
  // lower-cased byte string that must appear, case-insensitively, as a substring of the event's
  // @rawstring or of one of its field values). Terms shorter than the filter's gram size always
  // pass.
  virtual bool BlockMayContainAll(size_t i, const std::vector<std::string>& terms) const = 0;
  // False only when no event of block i has a field named `name` (format 2: the block has no
  // column of that name). Format 1 (and readers that do not know) always true.
  virtual bool BlockMayHaveField(size_t /*i*/, std::string_view /*name*/) const { return true; }
  virtual Status ReadBlock(size_t i, DecodedBlock* out) const = 0;
  // As ReadBlock, decoding at least `columns` (see ColumnSelection). Format 2 reads, checks and
  // decompresses only the column chunks asked for.
  virtual Status ReadBlockColumns(size_t i, const ColumnSelection& columns,
                                  DecodedBlock* out) const = 0;
  // Block i as stored, for SegmentFileWriter::AddStoredBlock (see StoredBlock: every chunk's
  // checksum verified, timestamps and positions checked). Format 2 only (FailedPrecondition for
  // format 1); Corruption as ReadBlock.
  virtual Status ReadStoredBlock(size_t i, StoredBlock* out) const = 0;
  // The segment's format version (1 or 2).
  virtual uint32_t format_version() const = 0;
  // Reads every block and checks the whole-file content hash against info().content_hash.
  virtual Status VerifyAll() const = 0;
};

// Opens segment files by file name, for libraries that read segments but must not depend on
// storage (the node's implementation is storage's SegmentStore, which owns the directory).
// Implementations are thread-safe; errors as SegmentReader::Open's, NotFound for a missing file.
class SegmentOpener {
 public:
  virtual ~SegmentOpener() = default;
  virtual Result<std::unique_ptr<SegmentReader>> Open(const std::string& file_name) const = 0;
};

// A SegmentOpener over a plain directory, for tools and tests that read segment files without a
// node (a node's segment directory is its SegmentStore's alone). Thread-safe.
class DirectorySegmentOpener final : public SegmentOpener {
 public:
  DirectorySegmentOpener(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}
  Result<std::unique_ptr<SegmentReader>> Open(const std::string& file_name) const override {
    return SegmentReader::Open(env_, JoinPath(dir_, file_name));
  }

 private:
  Env* const env_;
  const std::string dir_;
};

}  // namespace sediment
