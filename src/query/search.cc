#include "query/search.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sediment::query {
namespace {

struct LowerTable {
  unsigned char t[256];
  LowerTable() {
    for (int i = 0; i < 256; ++i) {
      t[i] = static_cast<unsigned char>(i >= 'A' && i <= 'Z' ? i - 'A' + 'a' : i);
    }
  }
};
const LowerTable kLower;

bool IsLowerLetter(unsigned char c) { return c >= 'a' && c <= 'z'; }

#if defined(__x86_64__)
const bool kHasAvx2 = __builtin_cpu_supports("avx2");
#endif

}  // namespace

CiSearcher::CiSearcher(std::string_view needle, bool exact_case)
    : needle_(needle), exact_case_(exact_case) {
  if (!exact_case_) {
    for (char& c : needle_) c = static_cast<char>(kLower.t[static_cast<unsigned char>(c)]);
  }
  if (!needle_.empty()) {
    first_ = static_cast<unsigned char>(needle_.front());
    last_ = static_cast<unsigned char>(needle_.back());
    first_fold_ = !exact_case_ && IsLowerLetter(first_) ? 0x20 : 0;
    last_fold_ = !exact_case_ && IsLowerLetter(last_) ? 0x20 : 0;
  }
}

// Bytes 1 .. n-2 of the needle at p (first and last already matched exactly).
bool CiSearcher::MiddleEquals(const char* p) const {
  const size_t n = needle_.size();
  if (exact_case_) return n <= 2 || std::memcmp(p + 1, needle_.data() + 1, n - 2) == 0;
  for (size_t k = 1; k + 1 < n; ++k) {
    if (kLower.t[static_cast<unsigned char>(p[k])] != static_cast<unsigned char>(needle_[k])) {
      return false;
    }
  }
  return true;
}

const char* CiSearcher::FindScalar(const char* begin, const char* end) const {
  const size_t n = needle_.size();
  if (static_cast<size_t>(end - begin) < n) return nullptr;
  for (const char* p = begin; p + n <= end; ++p) {
    if ((static_cast<unsigned char>(p[0]) | first_fold_) == first_ &&
        (static_cast<unsigned char>(p[n - 1]) | last_fold_) == last_ && MiddleEquals(p)) {
      return p;
    }
  }
  return nullptr;
}

#if defined(__x86_64__)
const char* CiSearcher::FindSse2(const char* begin, const char* end) const {
  const size_t n = needle_.size();
  if (static_cast<size_t>(end - begin) < n) return nullptr;
  const char* limit = end - n + 1;  // candidate starts are [begin, limit)
  const __m128i f = _mm_set1_epi8(static_cast<char>(first_));
  const __m128i l = _mm_set1_epi8(static_cast<char>(last_));
  const __m128i ff = _mm_set1_epi8(static_cast<char>(first_fold_));
  const __m128i lf = _mm_set1_epi8(static_cast<char>(last_fold_));
  const char* p = begin;
  for (; p + 16 <= limit; p += 16) {
    __m128i bf = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i bl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 1));
    __m128i eq = _mm_and_si128(_mm_cmpeq_epi8(_mm_or_si128(bf, ff), f),
                               _mm_cmpeq_epi8(_mm_or_si128(bl, lf), l));
    unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(eq));
    while (mask != 0) {
      unsigned bit = static_cast<unsigned>(__builtin_ctz(mask));
      if (MiddleEquals(p + bit)) return p + bit;
      mask &= mask - 1;
    }
  }
  return FindScalar(p, end);
}

__attribute__((target("avx2"))) const char* CiSearcher::FindAvx2(const char* begin,
                                                                 const char* end) const {
  const size_t n = needle_.size();
  if (static_cast<size_t>(end - begin) < n) return nullptr;
  const char* limit = end - n + 1;
  const __m256i f = _mm256_set1_epi8(static_cast<char>(first_));
  const __m256i l = _mm256_set1_epi8(static_cast<char>(last_));
  const __m256i ff = _mm256_set1_epi8(static_cast<char>(first_fold_));
  const __m256i lf = _mm256_set1_epi8(static_cast<char>(last_fold_));
  const bool middle = n > 2;  // else a first and last byte that match are the whole needle
  const char* p = begin;
  for (; p + 32 <= limit; p += 32) {
    __m256i bf = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    __m256i bl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + n - 1));
    __m256i eq = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_or_si256(bf, ff), f),
                                  _mm256_cmpeq_epi8(_mm256_or_si256(bl, lf), l));
    unsigned mask = static_cast<unsigned>(_mm256_movemask_epi8(eq));
    while (mask != 0) {
      unsigned bit = static_cast<unsigned>(__builtin_ctz(mask));
      if (!middle || MiddleEquals(p + bit)) return p + bit;
      mask &= mask - 1;
    }
  }
  return FindScalar(p, end);
}
#else
const char* CiSearcher::FindSse2(const char* begin, const char* end) const {
  return FindScalar(begin, end);
}
const char* CiSearcher::FindAvx2(const char* begin, const char* end) const {
  return FindScalar(begin, end);
}
#endif

const char* CiSearcher::Find(const char* begin, const char* end) const {
  if (needle_.empty()) return begin;
  if (begin == nullptr || end <= begin) return nullptr;
#if defined(__x86_64__)
  if (kHasAvx2) return FindAvx2(begin, end);
  return FindSse2(begin, end);
#else
  return FindScalar(begin, end);
#endif
}

bool GlobPiecesInOrder(const std::vector<CiSearcher>& pieces, std::string_view hay) {
  const char* p = hay.data();
  const char* end = hay.data() + hay.size();
  for (const CiSearcher& piece : pieces) {
    const char* at = piece.Find(p, end);
    if (at == nullptr) return false;
    p = at + piece.size();
  }
  return true;
}

const char* FindPrefix(std::string_view prefix, const CiSearcher* searcher, const char* p,
                       const char* end) {
  if (searcher != nullptr) return searcher->Find(p, end);  // exact: every byte compared
  for (;;) {
    if (static_cast<size_t>(end - p) < prefix.size()) return nullptr;
    p = static_cast<const char*>(
        std::memchr(p, prefix[0], static_cast<size_t>(end - p) - (prefix.size() - 1)));
    if (p == nullptr) return nullptr;
    size_t n = 0;  // prefixes are short: compare in place rather than call memcmp
    while (n < prefix.size() && p[n] == prefix[n]) ++n;
    if (n == prefix.size()) return p;
    ++p;
  }
}

}  // namespace sediment::query
