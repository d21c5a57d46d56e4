// Per-block n-gram bloom filter of segment files (FORMAT.md section "Block filter").
//
// A filter holds every 3-byte window ("trigram") of the folded @rawstring and field values of a
// block. Folding maps ASCII 'A'-'Z' to 'a'-'z' and every byte >= 0x80 to 0x80, so a term that
// matches case-insensitively (ASCII or any Unicode case mapping that keeps multi-byte characters
// multi-byte) is never rejected. The hash and bit layout are part of the on-disk format: do not
// change them without a new format version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sediment::segment_filter {

constexpr size_t kGramSize = 3;

inline uint8_t FoldByte(uint8_t b) {
  if (b >= 'A' && b <= 'Z') return static_cast<uint8_t>(b + ('a' - 'A'));
  return b >= 0x80 ? uint8_t{0x80} : b;
}

// Collects the distinct grams of one block and serializes the filter. Not thread-safe; reusable
// across blocks (Finish resets it). Holds a 2 MiB bitmap for de-duplication.
class FilterBuilder {
 public:
  FilterBuilder();
  // Adds every gram of `text` (no gram spans two Add calls).
  void Add(std::string_view text);
  size_t distinct_grams() const { return grams_.size(); }
  // Appends the filter for the grams added since the last Finish to *out and returns its size in
  // bytes: ceil(distinct * bits_per_gram / 64) * 8, at least 8. Resets the builder.
  size_t Finish(double bits_per_gram, int hashes, std::string* out);

 private:
  std::vector<uint64_t> seen_;   // 2^24 bits, one per possible folded gram
  std::vector<uint32_t> grams_;  // distinct folded grams, in first-seen order
};

// False only when `filter` (built with `hashes` probes) certainly lacks a gram of `term`. Terms
// shorter than kGramSize, and an empty filter or hashes == 0 (no filter), always give true.
bool MayContain(std::string_view filter, int hashes, std::string_view term);

}  // namespace sediment::segment_filter
