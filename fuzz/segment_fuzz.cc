// Fuzz target: the segment reader (SegmentReader::Open, ReadBlock, ReadBlockColumns,
// BlockMayContainAll, VerifyAll), reading a file from a memory Env, and the block copy of merges
// (ReadStoredBlock + SegmentFileWriter::AddStoredBlock: in every mode a format 2 block that reads
// is copied into a new segment, whose block must read back equal).
// Input: byte 0 picks the mode (byte 0 & 3: 0 and 2 as themselves, 1 mode 1, 3 mode 3), the
// rest is
//   mode 0: a whole segment file (format 1 or 2; blocks are also read with column selections). The
//   target writes the footer CRC and the content hash into the
//           trailer (when the trailer's footer location is in range) so that mutations of the
//           footer reach its parser; block CRCs are left as they are (libFuzzer's comparison
//           tracing finds them).
//   mode 1: the decompressed bytes of one block (its columns). The target compresses them and
//           wraps them in a segment file with a consistent footer (event count = the block's
//           first varint), so that mutations reach the column decoder.
//   mode 2: events (one per line; `k=v` words become fields, so that values are substrings of
//           @rawstring; byte 1 sets the block size). The target writes them with WriteSegment,
//           reads them back, and checks that every event comes back equal, that a read of one
//           field column gives exactly that field's values, and that no block filter rejects a
//           term (a 3+ byte piece of a word, lower-cased) its events contain. Bit 2 of byte 0
//           writes format 1 instead of format 2.
//   mode 3: the chunks of one format 2 block (see WrapChunks), wrapped in a segment file with a
//           consistent footer, so that mutations reach the format 2 column decoder.
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <xxhash.h>

#include "common/coding.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/mem_env.h"
#include "segment/segment.h"

using namespace sediment;

namespace {

constexpr size_t kHeaderSize = 16, kTrailerSize = 40;

void PutTrailer(std::string* file, uint64_t footer_offset, uint64_t footer_length,
                uint32_t version = 1) {
  PutFixed64(file, footer_offset);
  PutFixed64(file, footer_length);
  PutFixed32(file, Crc32c(std::string_view(*file).substr(footer_offset, footer_length)));
  PutFixed32(file, version);
  file->append("SEDIMEND", 8);
  PutFixed64(file, XXH64(file->data(), file->size(), 0));
}

// Mode 0: repairs the footer CRC and the content hash of a whole file.
std::string RepairTrailer(std::string_view in) {
  std::string file(in);
  if (file.size() < kHeaderSize + kTrailerSize) return file;
  const size_t t = file.size() - kTrailerSize;
  const uint64_t footer_offset = DecodeFixed64(file.data() + t);
  const uint64_t footer_length = DecodeFixed64(file.data() + t + 8);
  if (footer_offset <= t && footer_length <= t - footer_offset) {
    std::string crc;
    PutFixed32(&crc, Crc32c(std::string_view(file).substr(footer_offset, footer_length)));
    file.replace(t + 16, 4, crc);
  }
  std::string hash;
  PutFixed64(&hash, XXH64(file.data(), file.size() - 8, 0));
  file.replace(file.size() - 8, 8, hash);
  return file;
}

// Mode 1: a one-block segment file around `columns`.
std::string WrapBlock(std::string_view columns) {
  std::string file("SEDIMSEG", 8);
  PutFixed32(&file, 1);
  PutFixed32(&file, 0);
  std::string stored(ZSTD_compressBound(columns.size()), '\0');
  const size_t n = ZSTD_compress(stored.data(), stored.size(), columns.data(), columns.size(), 1);
  if (ZSTD_isError(n)) return {};
  stored.resize(n);
  file += stored;
  std::string_view c = columns;
  uint64_t events = 1;
  if (!GetVarint64(&c, &events) || events == 0 || events > columns.size()) events = 1;
  std::string footer;
  PutLengthPrefixed(&footer, "fuzz");
  PutVarint64(&footer, 1);
  PutLengthPrefixed(&footer, "#host");
  PutLengthPrefixed(&footer, "h");
  PutVarsint64(&footer, 0);  // partition
  PutVarsint64(&footer, 0);
  PutVarint64(&footer, 0);  // min_pos
  PutVarsint64(&footer, 9);
  PutVarint64(&footer, 0);  // max_pos
  PutVarsint64(&footer, 0);
  PutVarsint64(&footer, 1000);
  PutVarint64(&footer, events);
  PutVarint64(&footer, columns.size());
  PutVarint64(&footer, 1);  // block count
  PutVarint64(&footer, kHeaderSize);
  PutVarint64(&footer, stored.size());
  PutVarint64(&footer, columns.size());
  PutVarint64(&footer, events);
  PutVarsint64(&footer, 0);
  PutVarsint64(&footer, 1000);
  PutVarsint64(&footer, 0);
  PutVarint64(&footer, 0);
  PutVarsint64(&footer, 9);
  PutVarint64(&footer, 0);
  PutFixed32(&footer, Crc32c(stored));
  PutVarint64(&footer, 0);  // filter offset
  PutVarint64(&footer, 0);  // filter size
  footer.push_back(0);      // no filter
  PutVarint64(&footer, 0);  // filter area
  const uint64_t footer_offset = file.size();
  file += footer;
  PutTrailer(&file, footer_offset, footer.size());
  return file;
}

// Mode 3: a one-block format 2 file around column chunks, stored uncompressed, so that mutations
// reach the column decoder. Input: varint event count, varint raw bytes, varint name count (<= 16)
// and the names (lp), then chunks as (byte encoding, lp bytes): the five built-in columns, then one
// field column per name.
std::string WrapChunks(std::string_view in) {
  uint64_t events = 1, raw_bytes = 0, names = 0;
  if (!GetVarint64(&in, &events) || !GetVarint64(&in, &raw_bytes) || !GetVarint64(&in, &names))
    return {};
  if (events == 0 || events > 100000 || names > 16) return {};
  std::vector<std::string_view> name_list;
  for (uint64_t k = 0; k < names; ++k) {
    std::string_view n;
    if (!GetLengthPrefixed(&in, &n)) return {};
    name_list.push_back(n);
  }
  struct Chunk {
    uint8_t encoding;
    std::string_view data;
  };
  std::vector<Chunk> chunks;
  while (!in.empty() && chunks.size() < 5 + names) {
    const uint8_t enc = static_cast<uint8_t>(in[0]) % 3;
    in.remove_prefix(1);
    std::string_view d;
    if (!GetLengthPrefixed(&in, &d)) return {};
    chunks.push_back(Chunk{chunks.size() < 5 ? uint8_t{0} : enc, d});
  }
  if (chunks.size() < 5) return {};
  std::string file("SEDIMSEG", 8);
  PutFixed32(&file, 2);
  PutFixed32(&file, 0);
  uint64_t stored = 0;
  for (const Chunk& c : chunks) {
    file.append(c.data);
    stored += c.data.size();
  }
  if (stored == 0) return {};
  std::string footer;
  PutLengthPrefixed(&footer, "fuzz");
  PutVarint64(&footer, 0);   // no tags
  PutVarsint64(&footer, 0);  // partition
  PutVarsint64(&footer, 0);
  PutVarint64(&footer, 0);  // min_pos
  PutVarsint64(&footer, 9);
  PutVarint64(&footer, 0);  // max_pos
  PutVarsint64(&footer, 0);
  PutVarsint64(&footer, 1000);
  PutVarint64(&footer, events);
  PutVarint64(&footer, raw_bytes);
  PutVarint64(&footer, names);
  for (std::string_view n : name_list) PutLengthPrefixed(&footer, n);
  PutVarint64(&footer, 1);  // block count
  PutVarint64(&footer, kHeaderSize);
  PutVarint64(&footer, stored);
  PutVarint64(&footer, stored);
  PutVarint64(&footer, events);
  PutVarsint64(&footer, 0);
  PutVarsint64(&footer, 1000);
  PutVarsint64(&footer, 0);
  PutVarint64(&footer, 0);
  PutVarsint64(&footer, 9);
  PutVarint64(&footer, 0);
  PutVarint64(&footer, 0);  // filter offset
  PutVarint64(&footer, 0);  // filter size
  footer.push_back(0);      // no filter
  PutVarint64(&footer, raw_bytes);
  PutVarint64(&footer, chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) {
    PutVarint64(&footer, k);
    footer.push_back(0);  // stored
    footer.push_back(static_cast<char>(chunks[k].encoding));
    PutVarint64(&footer, chunks[k].data.size());
    PutVarint64(&footer, chunks[k].data.size());
    PutFixed32(&footer, Crc32c(chunks[k].data));
    if (chunks[k].encoding == 2) {
      PutVarsint64(&footer, 0);
      PutVarsint64(&footer, 0);
    }
  }
  PutVarint64(&footer, 0);  // filter area
  const uint64_t footer_offset = file.size();
  file += footer;
  PutTrailer(&file, footer_offset, footer.size(), 2);
  return file;
}

// Mode 2: lines as events.
std::vector<PositionedEvent> LinesAsEvents(std::string_view in) {
  std::vector<PositionedEvent> out;
  while (!in.empty() && out.size() < 200) {
    const size_t nl = in.find('\n');
    const std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    const size_t i = out.size();
    Event e;
    e.timestamp_ms = 1700000000000 + static_cast<int64_t>((i * 7919) % 13) * 1000 -
                     static_cast<int64_t>(line.size());
    e.ingest_ms = e.timestamp_ms + static_cast<int64_t>(i);
    e.raw = std::string(line);
    std::set<std::string> names;
    for (size_t at = 0; at < line.size();) {
      const size_t sp = std::min(line.find(' ', at), line.size());
      const std::string_view word = line.substr(at, sp - at);
      const size_t eq = word.find('=');
      if (eq != std::string_view::npos && names.insert(std::string(word.substr(0, eq))).second) {
        e.fields.push_back(
            Field{std::string(word.substr(0, eq)), std::string(word.substr(eq + 1))});
      }
      at = sp + 1;
    }
    if (i % 3 == 0) e.fields.push_back(Field{"#n", std::to_string(i)});
    out.push_back(PositionedEvent{
        Position{Offset(100 + static_cast<int64_t>(i / 3)), static_cast<uint32_t>(i % 3)},
        std::move(e)});
  }
  return out;
}

// The folded 3+ byte pieces of `s`'s words: terms a query may look for.
std::vector<std::string> Terms(std::string_view s) {
  std::vector<std::string> terms;
  for (size_t at = 0; at < s.size() && terms.size() < 8;) {
    const size_t sp = std::min(s.find(' ', at), s.size());
    if (sp - at >= 3) {
      std::string t(s.substr(at, std::min<size_t>(sp - at, 6)));
      for (char& c : t) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      terms.push_back(std::move(t));
    }
    at = sp + 1;
  }
  return terms;
}

// Copies format 2 block `i` of `r` (which ReadBlock decoded into `want`) into a new segment, as a
// merge does, and checks the copy decodes to the same events; a block that does not read is
// refused or copied without crashing.
void CheckCopy(const SegmentReader& r, size_t i, const DecodedBlock* want) {
  if (r.format_version() != 2) return;
  StoredBlock stored;
  if (!r.ReadStoredBlock(i, &stored).ok()) {
    if (want != nullptr) __builtin_trap();  // the block reads, so its chunks are intact
    return;
  }
  fuzz::MemEnv env;
  auto w = SegmentFileWriter::Create(&env, "/copy", r.info().datasource, r.info().partition);
  if (!w.ok()) __builtin_trap();
  if (!(*w)->AddStoredBlock(stored).ok()) {
    if (want != nullptr) __builtin_trap();
    return;
  }
  auto info = (*w)->Finish();
  if (!info.ok()) __builtin_trap();
  auto copy = SegmentReader::Open(&env, "/copy");
  if (!copy.ok() || (*copy)->blocks().size() != 1) __builtin_trap();
  DecodedBlock got;
  const bool read = (*copy)->ReadBlock(0, &got).ok();
  if (want == nullptr) return;
  if (!read || got.size() != want->size() || got.positions != want->positions ||
      got.timestamps != want->timestamps || got.ingest_ts != want->ingest_ts ||
      got.raw != want->raw || got.field_begin != want->field_begin ||
      got.fields.size() != want->fields.size())
    __builtin_trap();
  for (size_t k = 0; k < got.fields.size(); ++k) {
    if (got.fields[k].name != want->fields[k].name || got.fields[k].value != want->fields[k].value)
      __builtin_trap();
  }
}

void RoundTrip(bool format1, uint8_t block_choice, std::string_view in) {
  const std::vector<PositionedEvent> events = LinesAsEvents(in);
  if (events.empty()) return;
  fuzz::MemEnv env;
  SegmentWriterOptions options;
  options.format_version = format1 ? 1 : 2;
  options.block_raw_bytes = 32 + static_cast<size_t>(block_choice) * 8;
  const Datasource ds{"fuzz", {{"#host", "h"}}};
  auto info = WriteSegment(&env, "/seg", ds, PartitionId(1), events, options);
  if (!info.ok()) __builtin_trap();  // the arguments are valid
  auto reader = SegmentReader::Open(&env, "/seg");
  if (!reader.ok() || !(*reader)->VerifyAll().ok()) __builtin_trap();
  const SegmentReader& r = **reader;
  if (r.info().event_count != events.size()) __builtin_trap();
  size_t next = 0;
  DecodedBlock block;
  for (size_t b = 0; b < r.blocks().size(); ++b) {
    if (!r.ReadBlock(b, &block).ok()) __builtin_trap();
    CheckCopy(r, b, &block);
    for (size_t i = 0; i < block.size(); ++i, ++next) {
      if (next >= events.size()) __builtin_trap();
      const PositionedEvent& want = events[next];
      if (block.positions[i] != want.pos || block.timestamps[i] != want.event.timestamp_ms ||
          block.ingest_ts[i] != want.event.ingest_ms || block.raw[i] != want.event.raw) {
        __builtin_trap();
      }
      const size_t nf = block.field_begin[i + 1] - block.field_begin[i];
      if (nf != want.event.fields.size()) __builtin_trap();
      for (size_t k = 0; k < nf; ++k) {
        const FieldView& got = block.fields[block.field_begin[i] + k];
        if (got.name != want.event.fields[k].name || got.value != want.event.fields[k].value) {
          __builtin_trap();
        }
      }
      for (const std::string& t : Terms(want.event.raw)) {
        if (!r.BlockMayContainAll(b, {t})) __builtin_trap();  // a false negative loses events
      }
    }
  }
  if (next != events.size()) __builtin_trap();
  // One field column: exactly that field's values, in occurrence order, per event.
  std::string name;
  for (const PositionedEvent& e : events) {
    if (!e.event.fields.empty()) {
      name = e.event.fields.front().name;
      break;
    }
  }
  ColumnSelection one;
  one.all = false;
  one.fields = {name};
  next = 0;
  for (size_t b = 0; b < r.blocks().size(); ++b) {
    if (!r.ReadBlockColumns(b, one, &block).ok()) __builtin_trap();
    for (size_t i = 0; i < block.size(); ++i, ++next) {
      std::vector<std::string_view> want, got;
      for (const Field& f : events[next].event.fields) {
        if (f.name == name) want.push_back(f.value);
      }
      // Both homes of a partial read's values: `fields` and the dictionary columns.
      block.ForEachField(i, [&](std::string_view field, std::string_view value) {
        if (r.format_version() == 1 && field != name) return;
        if (field != name) __builtin_trap();
        got.push_back(value);
      });
      if (got != want || block.positions[i] != events[next].pos) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if ((data[0] & 3) == 2) {
    if (size >= 2) RoundTrip((data[0] & 4) != 0, data[1], fuzz::Bytes(data + 2, size - 2));
    return 0;
  }
  const std::string_view in = fuzz::Bytes(data + 1, size - 1);
  const std::string file = (data[0] & 3) == 3   ? WrapChunks(in)
                           : (data[0] & 1) != 0 ? WrapBlock(in)
                                                : RepairTrailer(in);
  fuzz::MemEnv env;
  env.Put("/seg", file);
  auto reader = SegmentReader::Open(&env, "/seg");
  if (!reader.ok()) return 0;
  const SegmentReader& r = **reader;
  DecodedBlock block;
  for (size_t i = 0; i < r.blocks().size(); ++i) {
    (void)r.BlockMayContainAll(i, {"err", "disk full", "x"});
    if (!r.ReadBlock(i, &block).ok()) {
      CheckCopy(r, i, nullptr);
      continue;
    }
    CheckCopy(r, i, &block);
    // Every view must lie inside the block's buffer (ASan checks the reads).
    auto touch = [](std::string_view s) {
      if (!s.empty()) {
        volatile char first = s.front(), last = s.back();
        (void)first, (void)last;
      }
    };
    for (std::string_view s : block.raw) touch(s);
    for (const FieldView& f : block.fields) touch(f.name), touch(f.value);
    if (block.field_begin.size() != block.size() + 1) __builtin_trap();
    // Partial reads (format 2 decodes only these columns): the names of the full read, and none.
    std::vector<std::string> names;
    for (std::string_view n : block.field_names) names.emplace_back(n);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (size_t take : {size_t{0}, size_t{1}, names.size()}) {
      ColumnSelection sel;
      sel.all = false;
      sel.fields.assign(names.begin(),
                        names.begin() + static_cast<ptrdiff_t>(std::min(take, names.size())));
      DecodedBlock part;
      if (!r.ReadBlockColumns(i, sel, &part).ok()) __builtin_trap();  // the full read succeeded
      if (part.size() != block.size() || part.field_begin.size() != part.size() + 1)
        __builtin_trap();
      for (const FieldView& f : part.fields) touch(f.name), touch(f.value);
      for (const DecodedBlock::DictColumn& d : part.dict_columns) {
        if (d.ids.size() != part.size()) __builtin_trap();
        for (uint32_t id : d.ids) {
          if (id != DecodedBlock::kNoValue && id >= d.values.size()) __builtin_trap();
        }
        for (std::string_view v : d.values) touch(v);
      }
    }
  }
  (void)r.VerifyAll();
  return 0;
}
