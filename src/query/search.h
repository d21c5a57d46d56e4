// Fast ASCII-case-insensitive substring search used by free-text filters. Immutable after
// construction; safe to use from many threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sediment::query {

class CiSearcher {
 public:
  // `needle` is matched ignoring ASCII case; non-ASCII bytes must match exactly. With
  // `exact_case`, every byte must match exactly (the same fast search, case-sensitive).
  explicit CiSearcher(std::string_view needle, bool exact_case = false);

  // Start of the first occurrence in [begin, end), or nullptr. An empty needle matches at begin.
  const char* Find(const char* begin, const char* end) const;
  bool Contains(std::string_view hay) const {
    return Find(hay.data(), hay.data() + hay.size()) != nullptr;
  }
  size_t size() const { return needle_.size(); }
  // Lower-cased (as given with exact_case).
  const std::string& needle() const { return needle_; }

 private:
  const char* FindScalar(const char* begin, const char* end) const;
  const char* FindSse2(const char* begin, const char* end) const;
  const char* FindAvx2(const char* begin, const char* end) const;
  bool MiddleEquals(const char* p) const;

  std::string needle_;
  bool exact_case_ = false;
  unsigned char first_ = 0, last_ = 0;            // lower-cased first / last byte
  unsigned char first_fold_ = 0, last_fold_ = 0;  // 0x20 when that byte is a letter
};

// Whether the pieces occur in `hay` in order without overlapping (ASCII case-insensitive): the
// unanchored wildcard match. Leftmost matching of each piece is optimal.
bool GlobPiecesInOrder(const std::vector<CiSearcher>& pieces, std::string_view hay);

// The first place in [p, end) where `prefix` (non-empty) starts, case-sensitively, or null.
// `searcher` (CiSearcher(prefix, exact_case=true)), when given, finds it; otherwise memchr of the
// prefix's first byte finds candidates.
const char* FindPrefix(std::string_view prefix, const CiSearcher* searcher, const char* p,
                       const char* end);

}  // namespace sediment::query
