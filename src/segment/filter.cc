#include "segment/filter.h"

#include <array>
#include <cmath>
#include <cstring>

namespace sediment::segment_filter {
namespace {

inline uint32_t Gram(const uint8_t* p) {
  return static_cast<uint32_t>(FoldByte(p[0])) | static_cast<uint32_t>(FoldByte(p[1])) << 8 |
         static_cast<uint32_t>(FoldByte(p[2])) << 16;
}

// FoldByte of every byte value.
constexpr auto kFold = [] {
  std::array<uint8_t, 256> t{};
  for (int b = 0; b < 256; ++b) {  // FoldByte's rule (filter.h), in a constant expression
    t[b] = static_cast<uint8_t>(b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b >= 0x80 ? 0x80 : b);
  }
  return t;
}();

// MurmurHash3 fmix64: the gram hash of FORMAT.md.
inline uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// Bit index of probe j among `bits` (< 2^32) bits: double hashing plus multiply-shift range map.
inline uint32_t Probe(uint64_t h, int j, uint64_t bits) {
  uint32_t x = static_cast<uint32_t>(h >> 32) + static_cast<uint32_t>(j) * static_cast<uint32_t>(h);
  return static_cast<uint32_t>((static_cast<uint64_t>(x) * bits) >> 32);
}

}  // namespace

FilterBuilder::FilterBuilder() : seen_((size_t{1} << 24) / 64, 0) {}

void FilterBuilder::Add(std::string_view text) {
  if (text.size() < kGramSize) return;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  // Rolling: each byte is folded once; g is Gram(p + i - 2) once byte i is in.
  uint32_t g = static_cast<uint32_t>(kFold[p[0]]) | static_cast<uint32_t>(kFold[p[1]]) << 8;
  uint64_t* const seen = seen_.data();
  for (size_t i = 2; i < size; ++i) {
    g |= static_cast<uint32_t>(kFold[p[i]]) << 16;
    uint64_t& word = seen[g >> 6];
    uint64_t bit = uint64_t{1} << (g & 63);
    if ((word & bit) == 0) {
      word |= bit;
      grams_.push_back(g);
    }
    g >>= 8;
  }
}

size_t FilterBuilder::Finish(double bits_per_gram, int hashes, std::string* out) {
  double want = std::ceil(static_cast<double>(grams_.size()) * bits_per_gram / 64.0);
  uint64_t words = want < 1 ? 1 : static_cast<uint64_t>(want);
  // Keep the bit count below 2^32 (the probe range map is 32-bit).
  if (words > (uint64_t{1} << 26) - 1) words = (uint64_t{1} << 26) - 1;
  const uint64_t bits = words * 64;
  std::vector<uint64_t> filter(words, 0);
  for (uint32_t g : grams_) {
    uint64_t h = Mix(g);
    for (int j = 0; j < hashes; ++j) {
      uint32_t b = Probe(h, j, bits);
      filter[b >> 6] |= uint64_t{1} << (b & 63);
    }
    seen_[g >> 6] = 0;
  }
  grams_.clear();
  const size_t bytes = words * 8;
  const size_t at = out->size();
  out->resize(at + bytes);
  std::memcpy(out->data() + at, filter.data(), bytes);  // little-endian words (FORMAT.md)
  return bytes;
}

bool MayContain(std::string_view filter, int hashes, std::string_view term) {
  if (hashes <= 0 || filter.size() < 8 || term.size() < kGramSize) return true;
  const uint64_t bits = static_cast<uint64_t>(filter.size() / 8) * 64;
  const auto* f = reinterpret_cast<const uint8_t*>(filter.data());
  const auto* p = reinterpret_cast<const uint8_t*>(term.data());
  const size_t n = term.size() - kGramSize + 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t h = Mix(Gram(p + i));
    for (int j = 0; j < hashes; ++j) {
      uint32_t b = Probe(h, j, bits);
      if ((f[b >> 3] & (1u << (b & 7))) == 0) return false;
    }
  }
  return true;
}

}  // namespace sediment::segment_filter
