#include "query/regex_prefilter.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "common/coding.h"
#include "query/text_util.h"

namespace sediment::query {
namespace {

// Bounds that keep the analysis small; exceeding one only loses information.
constexpr size_t kMaxExact = 16;       // strings of an exact set
constexpr size_t kMaxClauses = 8;      // clauses of a condition
constexpr size_t kMaxClauseSize = 16;  // literals of a clause
constexpr size_t kMaxLiteral = 256;    // bytes of an exact string
constexpr int kMaxDepth = 200;         // group nesting

using Clause = std::vector<std::string>;
using Cnf = std::vector<Clause>;

// What a subexpression matches: either exactly one of `strings` (ASCII-lower-cased; when
// `exact`), or strings that satisfy `cnf` (every clause has a literal the match contains).
struct Info {
  bool exact = false;
  std::vector<std::string> strings;
  Cnf cnf;
};

Info AnyInfo() { return Info{}; }
Info EmptyInfo() {
  Info i;
  i.exact = true;
  i.strings = {""};
  return i;
}
Info LiteralInfo(std::string s) {
  Info i;
  i.exact = true;
  i.strings = {Lower(s)};
  return i;
}

void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// Sorted, unique, and without literals that contain another literal of the clause (containing
// the shorter one is implied). An empty result means the clause always holds.
Clause Normalize(Clause c) {
  SortUnique(&c);
  for (const std::string& s : c) {
    if (s.empty()) return {};
  }
  Clause out;
  for (size_t i = 0; i < c.size(); ++i) {
    bool redundant = false;
    for (size_t j = 0; j < c.size() && !redundant; ++j) {
      if (i != j && c[j].size() <= c[i].size() && c[i].find(c[j]) != std::string::npos &&
          (c[j].size() < c[i].size() || j < i)) {
        redundant = true;
      }
    }
    if (!redundant) out.push_back(c[i]);
  }
  return out;
}

// Selectivity of a clause as a prefilter: longer shortest literal first, then fewer literals.
std::pair<size_t, size_t> Score(const Clause& c) {
  size_t shortest = SIZE_MAX;
  for (const std::string& s : c) shortest = std::min(shortest, s.size());
  return {shortest, SIZE_MAX - c.size()};
}

// Drops duplicate clauses and keeps the kMaxClauses most selective ones.
Cnf Trim(Cnf cnf) {
  std::sort(cnf.begin(), cnf.end());
  cnf.erase(std::unique(cnf.begin(), cnf.end()), cnf.end());
  if (cnf.size() > kMaxClauses) {
    std::stable_sort(cnf.begin(), cnf.end(),
                     [](const Clause& a, const Clause& b) { return Score(a) > Score(b); });
    cnf.resize(kMaxClauses);
  }
  return cnf;
}

Cnf ToCnf(const Info& i) {
  if (!i.exact) return i.cnf;
  Clause c = Normalize(i.strings);
  if (c.empty() || c.size() > kMaxClauseSize) return {};
  return {std::move(c)};
}

Info FromCnf(Cnf cnf) {
  Info i;
  i.cnf = Trim(std::move(cnf));
  return i;
}

Info Concat(const Info& a, const Info& b) {
  if (a.exact && b.exact && a.strings.size() * b.strings.size() <= kMaxExact) {
    Info out;
    out.exact = true;
    for (const std::string& x : a.strings) {
      for (const std::string& y : b.strings) out.strings.push_back(x + y);
    }
    SortUnique(&out.strings);
    const bool too_long = std::any_of(out.strings.begin(), out.strings.end(),
                                      [](const std::string& s) { return s.size() > kMaxLiteral; });
    if (!too_long) return out;
    return FromCnf(ToCnf(out));
  }
  Cnf cnf = ToCnf(a);
  Cnf more = ToCnf(b);
  cnf.insert(cnf.end(), more.begin(), more.end());
  return FromCnf(std::move(cnf));
}

Info Alternate(const Info& a, const Info& b) {
  if (a.exact && b.exact) {
    Info out;
    out.exact = true;
    out.strings = a.strings;
    out.strings.insert(out.strings.end(), b.strings.begin(), b.strings.end());
    SortUnique(&out.strings);
    if (out.strings.size() <= kMaxExact) return out;
  }
  // (A1 and A2 ...) or (B1 and B2 ...) = and over i, j of (Ai or Bj).
  const Cnf x = ToCnf(a);
  const Cnf y = ToCnf(b);
  Cnf out;
  for (const Clause& ca : x) {
    for (const Clause& cb : y) {
      Clause c = ca;
      c.insert(c.end(), cb.begin(), cb.end());
      c = Normalize(std::move(c));
      if (!c.empty() && c.size() <= kMaxClauseSize) out.push_back(std::move(c));
    }
  }
  return FromCnf(std::move(out));
}

// x?: the empty string or x.
Info Optional(const Info& x) {
  if (x.exact && x.strings.size() < kMaxExact) {
    Info out = x;
    out.strings.push_back("");
    SortUnique(&out.strings);
    return out;
  }
  return AnyInfo();
}

// x+ (or x{n,...} with n >= 1): every match contains a match of x.
Info AtLeastOnce(const Info& x) { return FromCnf(ToCnf(x)); }

bool IsAsciiLetter(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiAlnum(uint32_t c) { return IsAsciiLetter(c) || (c >= '0' && c <= '9'); }

// A character matched literally: under (?i) only ASCII characters whose case variants are all
// ASCII stay literals (k and s also match U+212A and U+017F; non-ASCII letters fold to other
// bytes).
Info CharInfo(uint32_t cp, bool ignore_case) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return AnyInfo();
  if (ignore_case) {
    if (cp >= 0x80) return AnyInfo();
    const uint32_t l = cp | 0x20;
    if (IsAsciiLetter(cp) && (l == 'k' || l == 's')) return AnyInfo();
  }
  std::string s;
  AppendUtf8(cp, &s);
  return LiteralInfo(std::move(s));
}

class Analyzer {
 public:
  explicit Analyzer(std::string_view p) : p_(p) {}

  std::optional<Info> Run() {
    bool ignore_case = false;
    Info i;
    if (!Alternation(&ignore_case, &i) || pos_ != p_.size()) return std::nullopt;
    return i;
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  // Flags set by (?i) last until the end of the enclosing group, across '|'.
  bool Alternation(bool* ignore_case, Info* out) {
    if (++depth_ > kMaxDepth) return false;
    Info acc;
    if (!Sequence(ignore_case, &acc)) return false;
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      Info next;
      if (!Sequence(ignore_case, &next)) return false;
      acc = Alternate(acc, next);
    }
    --depth_;
    *out = std::move(acc);
    return true;
  }

  // Exact atoms in a row are joined into `tail` (so "disk full" stays one literal after an
  // inexact atom); `done` holds the conditions of what came before.
  bool Sequence(bool* ignore_case, Info* out) {
    Cnf done;
    bool all_exact = true;
    Info tail = EmptyInfo();
    auto flush = [&]() {
      Cnf c = ToCnf(tail);
      done.insert(done.end(), c.begin(), c.end());
      tail = EmptyInfo();
      all_exact = false;
    };
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      Info atom;
      bool is_atom = true;
      if (!Atom(ignore_case, &atom, &is_atom)) return false;
      if (!is_atom) continue;
      if (!Quantifiers(&atom)) return false;
      if (atom.exact) {
        Info joined = Concat(tail, atom);
        if (joined.exact) {
          tail = std::move(joined);
        } else {
          flush();
          tail = std::move(atom);
        }
      } else {
        flush();
        done.insert(done.end(), atom.cnf.begin(), atom.cnf.end());
      }
    }
    if (all_exact) {
      *out = std::move(tail);
    } else {
      flush();
      *out = FromCnf(std::move(done));
    }
    return true;
  }

  // {n}, {n,}, {n,m} at pos_; false (pos_ unchanged) when it is not one ('{' is then a literal).
  bool Repeat(int* min) {
    size_t k = pos_ + 1;
    auto digits = [&]() {
      const size_t from = k;
      int v = 0;
      while (k < p_.size() && p_[k] >= '0' && p_[k] <= '9' && k - from < 6)
        v = v * 10 + (p_[k++] - '0');
      return k > from ? std::optional<int>(v) : std::nullopt;
    };
    std::optional<int> lo = digits();
    if (!lo) return false;
    if (k < p_.size() && p_[k] == ',') {
      ++k;
      digits();
    }
    if (k >= p_.size() || p_[k] != '}') return false;
    *min = *lo;
    pos_ = k + 1;
    return true;
  }

  bool Quantifiers(Info* x) {
    for (;;) {
      if (AtEnd()) return true;
      const char c = Peek();
      if (c == '*') {
        ++pos_;
        *x = AnyInfo();
      } else if (c == '?') {
        ++pos_;
        *x = Optional(*x);
      } else if (c == '+') {
        ++pos_;
        *x = AtLeastOnce(*x);
      } else if (c == '{') {
        int min = 0;
        if (!Repeat(&min)) return true;
        *x = min == 0 ? AnyInfo() : AtLeastOnce(*x);
      } else {
        return true;
      }
      if (!AtEnd() && Peek() == '?') ++pos_;  // non-greedy: the same strings
    }
  }

  // One UTF-8 character at pos_ into *cp; false when the bytes are not valid UTF-8.
  bool Utf8Char(uint32_t* cp) {
    const unsigned char b = static_cast<unsigned char>(Peek());
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > p_.size()) return false;
    uint32_t v = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const unsigned char c = static_cast<unsigned char>(p_[pos_ + k]);
      if ((c & 0xC0) != 0x80) return false;
      v = (v << 6) | (c & 0x3F);
    }
    pos_ += len;
    *cp = v;
    return true;
  }

  // Hex digits up to `close` (or `count` of them when close is 0) into *cp.
  bool Hex(char close, size_t count, uint32_t* cp) {
    uint32_t v = 0;
    size_t n = 0;
    while (!AtEnd() && (close == 0 ? n < count : Peek() != close)) {
      const char c = Peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0 || n >= 8) return false;
      v = v * 16 + static_cast<uint32_t>(d);
      ++n;
      ++pos_;
    }
    if (close != 0) {
      if (AtEnd() || n == 0) return false;
      ++pos_;
    } else if (n != count) {
      return false;
    }
    *cp = v;
    return true;
  }

  // After '\': a character given by an escape into *cp (is_char), or a class / assertion into
  // *info.
  bool Escape(bool ignore_case, Info* info) {
    if (AtEnd()) return false;
    const char c = Peek();
    ++pos_;
    uint32_t cp = 0;
    switch (c) {
      case 'd':
      case 'D':
      case 's':
      case 'S':
      case 'w':
      case 'W':
      case 'C':
        *info = AnyInfo();
        return true;
      case 'p':
      case 'P':
        if (Peek() == '{') {
          const size_t close = p_.find('}', pos_);
          if (close == std::string_view::npos) return false;
          pos_ = close + 1;
        } else {
          if (!Utf8Char(&cp)) return false;
        }
        *info = AnyInfo();
        return true;
      case 'b':
      case 'B':
      case 'A':
      case 'z':
        *info = EmptyInfo();
        return true;
      case 'Q': {
        Info acc = EmptyInfo();
        while (!AtEnd() && !(Peek() == '\\' && Peek(1) == 'E')) {
          if (!Utf8Char(&cp)) return false;
          acc = Concat(acc, CharInfo(cp, ignore_case));
        }
        if (!AtEnd()) pos_ += 2;
        *info = std::move(acc);
        return true;
      }
      case 'x':
        if (Peek() == '{') {
          ++pos_;
          if (!Hex('}', 0, &cp)) return false;
        } else if (!Hex(0, 2, &cp)) {
          return false;
        }
        *info = CharInfo(cp, ignore_case);
        return true;
      case 'a':
        *info = CharInfo(7, ignore_case);
        return true;
      case 'f':
        *info = CharInfo(12, ignore_case);
        return true;
      case 't':
        *info = CharInfo(9, ignore_case);
        return true;
      case 'n':
        *info = CharInfo(10, ignore_case);
        return true;
      case 'r':
        *info = CharInfo(13, ignore_case);
        return true;
      case 'v':
        *info = CharInfo(11, ignore_case);
        return true;
      default:
        break;
    }
    if (c >= '0' && c <= '7') {  // octal: up to two more digits
      for (int k = 0; k < 2 && Peek() >= '0' && Peek() <= '7'; ++k) ++pos_;
      *info = AnyInfo();
      return true;
    }
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && !IsAsciiAlnum(u) && u > 0x20) {  // escaped punctuation
      *info = CharInfo(u, ignore_case);
      return true;
    }
    return false;
  }

  // After '[': skips the class; *info is the exact set of its characters when it lists a few
  // ASCII characters only (no ranges, classes, negation or escapes but punctuation), else any.
  bool CharClass(bool ignore_case, Info* info) {
    bool simple = true;
    std::vector<std::string> chars;
    if (Peek() == '^') {
      simple = false;
      ++pos_;
    }
    bool first = true;
    while (!AtEnd() && (Peek() != ']' || first)) {
      first = false;
      uint32_t cp = 0;
      if (Peek() == '[' && Peek(1) == ':') {
        const size_t close = p_.find(":]", pos_ + 2);
        if (close != std::string_view::npos) {
          pos_ = close + 2;
          simple = false;
          continue;
        }
      }
      if (Peek() == '\\') {
        ++pos_;
        if (AtEnd()) return false;
        const char e = Peek();
        if (e == 'p' || e == 'P' || e == 'x') {
          ++pos_;
          if (Peek() == '{') {
            const size_t close = p_.find('}', pos_);
            if (close == std::string_view::npos) return false;
            pos_ = close + 1;
          } else if (!Utf8Char(&cp) || (e == 'x' && !Utf8Char(&cp))) {
            return false;
          }
          simple = false;
          continue;
        }
        if (!Utf8Char(&cp)) return false;
        if (cp >= 0x80 || IsAsciiAlnum(cp)) {
          simple = false;
          continue;
        }
      } else {
        if (!Utf8Char(&cp)) return false;
        if (cp == '-' && Peek() != ']') simple = false;  // a range (or an ambiguous dash)
      }
      if (cp >= 0x80) simple = false;
      if (simple) {
        Info ch = CharInfo(cp, ignore_case);
        if (!ch.exact)
          simple = false;
        else
          chars.push_back(ch.strings[0]);
      }
    }
    if (AtEnd()) return false;
    ++pos_;  // ']'
    SortUnique(&chars);
    if (simple && !chars.empty() && chars.size() <= 4) {
      info->exact = true;
      info->strings = std::move(chars);
    } else {
      *info = AnyInfo();
    }
    return true;
  }

  // A group's flags "imsU-" up to ':' or ')'.
  bool Flags(bool* ignore_case) {
    bool negate = false;
    while (!AtEnd() && Peek() != ':' && Peek() != ')') {
      const char c = Peek();
      if (c == '-') {
        if (negate) return false;
        negate = true;
      } else if (c == 'i') {
        *ignore_case = !negate;
      } else if (c != 'm' && c != 's' && c != 'U') {
        return false;
      }
      ++pos_;
    }
    return !AtEnd();
  }

  bool Atom(bool* ignore_case, Info* out, bool* is_atom) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      bool inner_case = *ignore_case;
      if (Peek() == '?') {
        ++pos_;
        if (Peek() == 'P' && Peek(1) == '<') {
          pos_ += 2;
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos) return false;
          pos_ = close + 1;
        } else if (Peek() == '<' && Peek(1) != '=' && Peek(1) != '!') {
          ++pos_;
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos) return false;
          pos_ = close + 1;
        } else {
          if (!Flags(&inner_case)) return false;
          if (Peek() == ')') {  // (?i): for the rest of the enclosing group
            ++pos_;
            *ignore_case = inner_case;
            *is_atom = false;
            return true;
          }
          ++pos_;  // ':'
        }
      }
      if (!Alternation(&inner_case, out)) return false;
      if (AtEnd() || Peek() != ')') return false;
      ++pos_;
      return true;
    }
    if (c == '[') {
      ++pos_;
      return CharClass(*ignore_case, out);
    }
    if (c == '.') {
      ++pos_;
      *out = AnyInfo();
      return true;
    }
    if (c == '^' || c == '$') {
      ++pos_;
      *out = EmptyInfo();
      return true;
    }
    if (c == '\\') {
      ++pos_;
      return Escape(*ignore_case, out);
    }
    if (c == '*' || c == '+' || c == '?') return false;  // RE2 rejects these
    uint32_t cp = 0;
    if (!Utf8Char(&cp)) return false;
    *out = CharInfo(cp, *ignore_case);
    return true;
  }

  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

RegexLiterals AnalyzeRegexPattern(std::string_view pattern) {
  std::optional<Info> info = Analyzer(pattern).Run();
  RegexLiterals out;
  if (!info) return out;
  for (Clause& c : ToCnf(*info)) {
    c = Normalize(std::move(c));
    if (!c.empty()) out.clauses.push_back(std::move(c));
  }
  std::sort(out.clauses.begin(), out.clauses.end());
  out.clauses.erase(std::unique(out.clauses.begin(), out.clauses.end()), out.clauses.end());
  return out;
}

RegexLiterals AnalyzeRegex(const re2::RE2& re) {
  const re2::RE2::Options& o = re.options();
  if (!re.ok() || o.encoding() != re2::RE2::Options::EncodingUTF8 || o.posix_syntax() ||
      o.literal() || o.never_nl() || !o.case_sensitive() || o.longest_match()) {
    return {};
  }
  return AnalyzeRegexPattern(re.pattern());
}

std::vector<std::string> RequiredRegexTerms(const RegexLiterals& lits) {
  std::vector<std::string> out;
  for (const Clause& c : lits.clauses) {
    for (const std::string& t : c) {
      if (std::all_of(c.begin(), c.end(),
                      [&](const std::string& u) { return u.find(t) != std::string::npos; })) {
        out.push_back(t);
        break;
      }
    }
  }
  SortUnique(&out);
  return out;
}

std::vector<CiSearcher> RegexPrefilter(const RegexLiterals& lits) {
  const Clause* best = nullptr;
  for (const Clause& c : lits.clauses) {
    if (c.empty() || c.size() > kMaxPrefilterLiterals || Score(c).first < kMinPrefilterLiteral) {
      continue;
    }
    if (best == nullptr || Score(c) > Score(*best)) best = &c;
  }
  std::vector<CiSearcher> out;
  if (best != nullptr) {
    for (const std::string& s : *best) out.emplace_back(s);
  }
  return out;
}

bool PrefilterAdmits(const std::vector<CiSearcher>& prefilter, std::string_view text) {
  if (prefilter.empty()) return true;
  for (const CiSearcher& s : prefilter) {
    if (s.Contains(text)) return true;
  }
  return false;
}

}  // namespace sediment::query
