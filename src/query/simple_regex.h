// A backtracking matcher for the simple regular expressions that regex() extractions mostly are:
// a sequence of literal bytes and ASCII character classes (\d, \w, \s, ., [...]), each with an
// optional quantifier (?, *, +, {n}, {n,}, {n,m}, greedy or lazy), inside named or non-capturing
// groups that are not themselves repeated. It finds the same match and the same submatches as
// RE2 (leftmost-first, Perl's choice of submatches) at a fraction of RE2's cost per call, and
// says kUnknown, to be asked of RE2, whenever it cannot be sure: a byte >= 0x80 where a negated
// class or `.` could take it (RE2 takes whole UTF-8 characters there), or more backtracking
// steps than its budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace sediment::query {

// Immutable once compiled; Match is reentrant (all state is on the caller's stack).
class SimpleRegex {
 public:
  // The matcher for `re` (its pattern and options), or null when the pattern is outside the
  // subset: alternation, anchors (^ $ \b \A \z), repeated groups, case folding, back references,
  // non-ASCII bytes, Unicode classes, or options other than RE2's defaults.
  static std::unique_ptr<SimpleRegex> Compile(const re2::RE2& re);

  enum class Outcome { kMatch, kNoMatch, kUnknown };
  // One capture: byte offsets [begin, end) in the text; begin = -1 when it took no part.
  struct Span {
    int64_t begin = -1;
    int64_t end = -1;
  };

  // The leftmost-first match of the whole pattern starting exactly at `at` in `text`. On kMatch,
  // caps[0] is the match and caps[1..captures()] the groups (in RE2's capture numbering); `caps`
  // holds captures() + 1 spans.
  Outcome MatchAt(std::string_view text, size_t at, Span* caps) const;
  // MatchAt when fixed() (precondition), without its general set-up: kMatch or kNoMatch only.
  // caps[0..captures()] are set on kMatch and left as they were on kNoMatch.
  Outcome MatchFixedAt(std::string_view text, size_t at, Span* caps) const;
  // The leftmost-first match anywhere at or after `from`.
  Outcome Search(std::string_view text, size_t from, Span* caps) const;

  int captures() const { return captures_; }
  // True when every element after the leading literals takes a fixed number of bytes from a class
  // of ASCII bytes only (groups aside), as in `" (?<status>\d{3}) `: a match from a position is
  // then decided in one pass, without backtracking.
  bool fixed() const { return fixed_; }

 private:
  struct Elem {
    enum class Kind : uint8_t { kClass, kOpen, kClose };
    Kind kind = Kind::kClass;
    bool high = false;  // kClass: RE2 would also match characters >= 0x80 (negated class, `.`)
    bool lazy = false;
    int cap = 0;  // kOpen/kClose: capture index
    uint32_t min = 1, max = 1;
    uint64_t bits[2] = {0, 0};  // kClass: member bytes 0..127
    bool Has(unsigned char c) const { return (bits[c >> 6] >> (c & 63)) & 1; }
  };
  struct State;
  // A match from `at`: MatchFixedAt when fixed_; else the leading literal bytes compared in
  // place, then Step from the first element after them. Precondition: at <= s.text.size().
  Outcome Start(State& s, size_t at) const;
  Outcome Step(State& s, size_t e, size_t pos) const;

  std::vector<Elem> elems_;
  int captures_ = 0;
  int first_ = -1;  // index in elems_ of the class every match starts with, -1 when none
  // The bytes taken by elems_[0, lead_.size()): leading elements that each take exactly one
  // given byte (literals).
  std::string lead_;
  bool fixed_ = false;
  // When fixed_: the class of each byte after the leading literals, and where the groups open
  // and close, as byte offsets from there (in element order).
  struct Mark {
    int cap = 0;
    bool open = false;
    uint32_t offset = 0;
  };
  std::vector<Elem> fixed_bytes_;
  std::vector<Mark> fixed_marks_;
  // When fixed_ and the match takes at most 64 bytes (lead_ and fixed_bytes_): for each byte
  // value, bit j set when it may be the match's byte j; else empty.
  std::vector<uint64_t> fixed_table_;
};

}  // namespace sediment::query
