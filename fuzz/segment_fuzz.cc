// Fuzz target: the segment reader (SegmentReader::Open, ReadBlock, BlockMayContainAll,
// VerifyAll), reading a file from a memory Env.
// Input: byte 0 picks the mode (bit 0), the rest is
//   mode 0: a whole segment file. The target writes the footer CRC and the content hash into the
//           trailer (when the trailer's footer location is in range) so that mutations of the
//           footer reach its parser; block CRCs are left as they are (libFuzzer's comparison
//           tracing finds them).
//   mode 1: the decompressed bytes of one block (its columns). The target compresses them and
//           wraps them in a segment file with a consistent footer (event count = the block's
//           first varint), so that mutations reach the column decoder.
#include <zstd.h>

#include <cstddef>
#include <cstdint>
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

void PutTrailer(std::string* file, uint64_t footer_offset, uint64_t footer_length) {
  PutFixed64(file, footer_offset);
  PutFixed64(file, footer_length);
  PutFixed32(file, Crc32c(std::string_view(*file).substr(footer_offset, footer_length)));
  PutFixed32(file, 1);
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in = fuzz::Bytes(data + 1, size - 1);
  const std::string file = (data[0] & 1) ? WrapBlock(in) : RepairTrailer(in);
  fuzz::MemEnv env;
  env.Put("/seg", file);
  auto reader = SegmentReader::Open(&env, "/seg");
  if (!reader.ok()) return 0;
  const SegmentReader& r = **reader;
  DecodedBlock block;
  for (size_t i = 0; i < r.blocks().size(); ++i) {
    (void)r.BlockMayContainAll(i, {"err", "disk full", "x"});
    if (!r.ReadBlock(i, &block).ok()) continue;
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
  }
  (void)r.VerifyAll();
  return 0;
}
