// ASCII text helpers shared by the query engine's sources (internal, not part of the API).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sediment::query {

// `c` lower-cased when it is an ASCII capital letter, else `c`.
inline char AsciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// A copy of `s` with its ASCII letters lower-cased (other bytes unchanged).
inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

// Whether `a` and `b` are equal ignoring ASCII case.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// Appends the non-empty runs between the '*' characters of `pattern` to *out, lower-cased.
inline void AppendGlobPieces(std::string_view pattern, std::vector<std::string>* out) {
  size_t start = 0;
  for (size_t i = 0; i <= pattern.size(); ++i) {
    if (i == pattern.size() || pattern[i] == '*') {
      if (i > start) out->push_back(Lower(pattern.substr(start, i - start)));
      start = i + 1;
    }
  }
}

}  // namespace sediment::query
