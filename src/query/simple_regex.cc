#include "query/simple_regex.h"

#include <re2/re2.h>

#include <algorithm>
#include <limits>
#include <string>

namespace sediment::query {
namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
// More elements than this: leave the pattern to RE2 (the matcher recurses once per element).
constexpr size_t kMaxElems = 64;
// Backtracking steps one MatchAt may take before it gives up with kUnknown.
constexpr int64_t kStepBudget = 10000;

bool IsMeta(char c) {
  return std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos;
}

// An escape that stands for one byte (\t, \n, an escaped punctuation byte); -1 otherwise.
int EscapedByte(char c) {
  switch (c) {
    case 't':
      return '\t';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    default:
      break;
  }
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x80 && u > 0x20 && !std::isalnum(u)) return u;
  return -1;
}

struct Bits {
  uint64_t b[2] = {0, 0};
  void Add(int c) { b[c >> 6] |= uint64_t{1} << (c & 63); }
  void AddRange(int lo, int hi) {
    for (int c = lo; c <= hi; ++c) Add(c);
  }
  void Invert() {
    b[0] = ~b[0];
    b[1] = ~b[1];
  }
};

// Perl classes as RE2 defines them: \d [0-9], \w [0-9A-Za-z_], \s [\t\n\f\r ].
bool PerlClass(char c, Bits* out, bool* negated) {
  Bits b;
  switch (c) {
    case 'd':
    case 'D':
      b.AddRange('0', '9');
      break;
    case 'w':
    case 'W':
      b.AddRange('0', '9');
      b.AddRange('A', 'Z');
      b.AddRange('a', 'z');
      b.Add('_');
      break;
    case 's':
    case 'S':
      for (int x : {'\t', '\n', '\f', '\r', ' '}) b.Add(x);
      break;
    default:
      return false;
  }
  *negated = std::isupper(static_cast<unsigned char>(c)) != 0;
  if (*negated) b.Invert();
  *out = b;
  return true;
}

}  // namespace

struct SimpleRegex::State {
  std::string_view text;
  Span* caps;
  int64_t budget;
};

std::unique_ptr<SimpleRegex> SimpleRegex::Compile(const re2::RE2& re) {
  const re2::RE2::Options& o = re.options();
  if (!re.ok() || o.encoding() != re2::RE2::Options::EncodingUTF8 || o.posix_syntax() ||
      o.longest_match() || o.literal() || o.never_nl() || o.dot_nl() || o.never_capture() ||
      !o.case_sensitive()) {
    return nullptr;
  }
  const std::string& p = re.pattern();
  auto out = std::unique_ptr<SimpleRegex>(new SimpleRegex());
  size_t i = 0;
  bool dotall = false;
  // Leading flag groups: (?m) only changes ^ and $, which are not in the subset; (?s) lets `.`
  // take newlines.
  while (p.compare(i, 2, "(?") == 0) {
    size_t j = i + 2;
    bool s = false;
    while (j < p.size() && (p[j] == 'm' || p[j] == 's')) s |= p[j++] == 's';
    if (j == i + 2 || j >= p.size() || p[j] != ')') break;
    dotall |= s;
    i = j + 1;
  }
  std::vector<int> open;  // capture index of each open group, 0 for (?:...)
  while (i < p.size()) {
    const char c = p[i];
    if (static_cast<unsigned char>(c) >= 0x80) return nullptr;
    if (c == '(') {
      if (p.compare(i, 3, "(?:") == 0) {
        open.push_back(0);
        i += 3;
        continue;
      }
      if (p.compare(i, 3, "(?P") == 0 || p.compare(i, 3, "(?<") == 0) {
        const size_t name = p.find('>', i);
        if (p.compare(i, 4, "(?P<") != 0 && p.compare(i, 3, "(?<") != 0) return nullptr;
        if (name == std::string::npos) return nullptr;
        i = name + 1;
      } else if (i + 1 < p.size() && p[i + 1] == '?') {
        return nullptr;  // (?i), (?flags:...), look-arounds RE2 would have refused
      } else {
        ++i;
      }
      Elem e;
      e.kind = Elem::Kind::kOpen;
      e.cap = ++out->captures_;
      open.push_back(e.cap);
      out->elems_.push_back(e);
      continue;
    }
    if (c == ')') {
      if (open.empty()) return nullptr;
      const int cap = open.back();
      open.pop_back();
      ++i;
      if (i < p.size() && std::string_view("*+?{").find(p[i]) != std::string_view::npos) {
        return nullptr;  // a repeated group
      }
      if (cap != 0) {
        Elem e;
        e.kind = Elem::Kind::kClose;
        e.cap = cap;
        out->elems_.push_back(e);
      }
      continue;
    }
    // One atom: a class of bytes.
    Elem e;
    Bits bits;
    bool high = false;
    if (c == '.') {
      bits.AddRange(0, 127);
      if (!dotall) bits.b[0] &= ~(uint64_t{1} << '\n');
      high = true;
      ++i;
    } else if (c == '\\') {
      if (i + 1 >= p.size()) return nullptr;
      if (!PerlClass(p[i + 1], &bits, &high)) {
        const int b = EscapedByte(p[i + 1]);
        if (b < 0) return nullptr;  // \b, \A, \z, \Q, \x41, \pL, \1, ...
        bits.Add(b);
      }
      i += 2;
    } else if (c == '[') {
      ++i;
      const bool negated = i < p.size() && p[i] == '^';
      if (negated) ++i;
      if (i >= p.size() || p[i] == ']') return nullptr;
      // Reads one byte of a class (a plain or escaped byte) at p[i]; -1 when it is not one.
      auto class_byte = [&](size_t at, size_t* next) -> int {
        if (at >= p.size()) return -1;
        const auto u = static_cast<unsigned char>(p[at]);
        if (u >= 0x80) return -1;
        if (u != '\\') {
          *next = at + 1;
          return u;
        }
        if (at + 1 >= p.size()) return -1;
        *next = at + 2;
        return EscapedByte(p[at + 1]);
      };
      while (i < p.size() && p[i] != ']') {
        if (p[i] == '[') return nullptr;  // [:alpha:] and nested classes
        if (p[i] == '\\' && i + 1 < p.size()) {
          Bits perl;
          bool neg = false;
          if (PerlClass(p[i + 1], &perl, &neg)) {
            if (neg) return nullptr;
            bits.b[0] |= perl.b[0];
            bits.b[1] |= perl.b[1];
            i += 2;
            continue;
          }
        }
        size_t next = i;
        const int lo = class_byte(i, &next);
        if (lo < 0) return nullptr;
        i = next;
        if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
          const int hi = class_byte(i + 1, &next);
          if (hi < 0 || hi < lo) return nullptr;
          bits.AddRange(lo, hi);
          i = next;
        } else {
          bits.Add(lo);
        }
      }
      if (i >= p.size()) return nullptr;
      ++i;  // ']'
      if (negated) {
        bits.Invert();
        high = true;
      }
    } else if (IsMeta(c)) {
      return nullptr;  // | ^ $ a quantifier without an atom, a lone ] or }
    } else {
      bits.Add(static_cast<unsigned char>(c));
      ++i;
    }
    e.bits[0] = bits.b[0];
    e.bits[1] = bits.b[1];
    e.high = high;
    // Its quantifier.
    if (i < p.size()) {
      const char q = p[i];
      if (q == '*' || q == '+' || q == '?') {
        e.min = q == '+' ? 1 : 0;
        e.max = q == '?' ? 1 : kUnbounded;
        ++i;
      } else if (q == '{') {
        const size_t close = p.find('}', i);
        if (close == std::string::npos) return nullptr;
        const std::string body = p.substr(i + 1, close - i - 1);
        const size_t comma = body.find(',');
        auto number = [](const std::string& s, uint32_t* v) {
          if (s.empty() || s.size() > 4 ||
              !std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            return false;
          }
          *v = static_cast<uint32_t>(std::stoul(s));
          return true;
        };
        if (comma == std::string::npos) {
          if (!number(body, &e.min)) return nullptr;
          e.max = e.min;
        } else {
          if (!number(body.substr(0, comma), &e.min)) return nullptr;
          const std::string hi = body.substr(comma + 1);
          if (hi.empty()) {
            e.max = kUnbounded;
          } else if (!number(hi, &e.max) || e.max < e.min) {
            return nullptr;
          }
        }
        i = close + 1;
      }
      if (i < p.size() && p[i] == '?' && (e.min != 1 || e.max != 1)) {
        e.lazy = true;
        ++i;
      }
      if (i < p.size() && std::string_view("*+?{").find(p[i]) != std::string_view::npos) {
        return nullptr;
      }
    }
    out->elems_.push_back(e);
  }
  if (!open.empty() || out->elems_.size() > kMaxElems) return nullptr;
  if (out->captures_ != re.NumberOfCapturingGroups()) return nullptr;
  // The first class element bounds where a match may start when it must take a byte (only
  // groups, which take none, come before it).
  for (size_t k = 0; k < out->elems_.size(); ++k) {
    const Elem& x = out->elems_[k];
    if (x.kind != Elem::Kind::kClass) continue;
    if (x.min >= 1) out->first_ = static_cast<int>(k);
    break;
  }
  // The leading elements that each take exactly one given byte: compared in one loop, not one
  // recursive step each.
  for (const Elem& x : out->elems_) {
    if (x.kind != Elem::Kind::kClass || x.min != 1 || x.max != 1 || x.high) break;
    const int n = __builtin_popcountll(x.bits[0]) + __builtin_popcountll(x.bits[1]);
    if (n != 1) break;
    const int c = x.bits[0] != 0 ? __builtin_ctzll(x.bits[0]) : 64 + __builtin_ctzll(x.bits[1]);
    out->lead_.push_back(static_cast<char>(c));
  }
  out->fixed_ = std::all_of(
      out->elems_.begin() + static_cast<std::ptrdiff_t>(out->lead_.size()), out->elems_.end(),
      [](const Elem& x) { return x.kind != Elem::Kind::kClass || (x.min == x.max && !x.high); });
  if (out->fixed_) {
    for (size_t e = out->lead_.size(); e < out->elems_.size(); ++e) {
      const Elem& x = out->elems_[e];
      const auto offset = static_cast<uint32_t>(out->fixed_bytes_.size());
      if (x.kind == Elem::Kind::kClass) {
        out->fixed_bytes_.insert(out->fixed_bytes_.end(), x.min, x);
      } else {
        out->fixed_marks_.push_back(Mark{x.cap, x.kind == Elem::Kind::kOpen, offset});
      }
    }
    const size_t lead = out->lead_.size();
    if (lead + out->fixed_bytes_.size() <= 64) {
      out->fixed_table_.assign(256, 0);
      for (size_t j = 0; j < lead; ++j) {
        out->fixed_table_[static_cast<unsigned char>(out->lead_[j])] |= uint64_t{1} << j;
      }
      for (size_t j = 0; j < out->fixed_bytes_.size(); ++j) {
        for (unsigned c = 0; c < 0x80; ++c) {
          if (out->fixed_bytes_[j].Has(static_cast<unsigned char>(c))) {
            out->fixed_table_[c] |= uint64_t{1} << (lead + j);
          }
        }
      }
    }
  }
  return out;
}

SimpleRegex::Outcome SimpleRegex::Start(State& s, size_t at) const {
  if (fixed_) return MatchFixedAt(s.text, at, s.caps);
  const size_t n = lead_.size();
  if (s.text.size() - at < n) return Outcome::kNoMatch;
  for (size_t k = 0; k < n; ++k) {
    if (s.text[at + k] != lead_[k]) return Outcome::kNoMatch;
  }
  return Step(s, n, at + n);
}

SimpleRegex::Outcome SimpleRegex::Step(State& s, size_t e, size_t pos) const {
  if (--s.budget < 0) return Outcome::kUnknown;
  if (e == elems_.size()) {
    s.caps[0].end = static_cast<int64_t>(pos);
    return Outcome::kMatch;
  }
  const Elem& x = elems_[e];
  if (x.kind == Elem::Kind::kOpen) {
    const Span saved = s.caps[x.cap];
    s.caps[x.cap].begin = static_cast<int64_t>(pos);
    s.caps[x.cap].end = -1;
    const Outcome r = Step(s, e + 1, pos);
    if (r == Outcome::kNoMatch) s.caps[x.cap] = saved;
    return r;
  }
  if (x.kind == Elem::Kind::kClose) {
    const int64_t saved = s.caps[x.cap].end;
    s.caps[x.cap].end = static_cast<int64_t>(pos);
    const Outcome r = Step(s, e + 1, pos);
    if (r == Outcome::kNoMatch) s.caps[x.cap].end = saved;
    return r;
  }
  const size_t avail = s.text.size() - pos;
  const size_t limit = x.max == kUnbounded ? avail : std::min<size_t>(x.max, avail);
  size_t k = 0;
  while (k < limit) {
    const auto c = static_cast<unsigned char>(s.text[pos + k]);
    if (c >= 0x80) {
      if (x.high) return Outcome::kUnknown;  // RE2 would take a whole UTF-8 character
      break;
    }
    if (!x.Has(c)) break;
    ++k;
  }
  if (k < x.min) return Outcome::kNoMatch;
  if (k == x.min) return Step(s, e + 1, pos + k);
  if (x.lazy) {
    for (size_t j = x.min; j <= k; ++j) {
      const Outcome r = Step(s, e + 1, pos + j);
      if (r != Outcome::kNoMatch) return r;
    }
    return Outcome::kNoMatch;
  }
  for (size_t j = k + 1; j-- > x.min;) {
    const Outcome r = Step(s, e + 1, pos + j);
    if (r != Outcome::kNoMatch) return r;
  }
  return Outcome::kNoMatch;
}

// Each class element takes exactly x.min bytes, and bytes >= 0x80 are in none of them, so the one
// way to match from `at` is checked byte by byte; every group is set.
SimpleRegex::Outcome SimpleRegex::MatchFixedAt(std::string_view text, size_t at, Span* caps) const {
  const size_t n = lead_.size();
  const size_t width = fixed_bytes_.size();
  if (at > text.size() || text.size() - at < n + width) return Outcome::kNoMatch;
  const char* const t = text.data() + at;
  if (!fixed_table_.empty()) {
    // Byte j must have bit j: shifted to bit 0, all of them.
    uint64_t ok = 1;
    for (size_t j = 0; j < n + width; ++j) {
      ok &= fixed_table_[static_cast<unsigned char>(t[j])] >> j;
    }
    if (ok == 0) return Outcome::kNoMatch;
  } else {
    for (size_t k = 0; k < n; ++k) {
      if (t[k] != lead_[k]) return Outcome::kNoMatch;
    }
    for (size_t j = 0; j < width; ++j) {
      const auto c = static_cast<unsigned char>(t[n + j]);
      if (c >= 0x80 || !fixed_bytes_[j].Has(c)) return Outcome::kNoMatch;
    }
  }
  // Every group is set: none is optional in a fixed pattern.
  const auto from = static_cast<int64_t>(at + n);
  for (const Mark& m : fixed_marks_) {
    if (m.open) {
      caps[m.cap].begin = from + m.offset;
    } else {
      caps[m.cap].end = from + m.offset;
    }
  }
  caps[0] = Span{static_cast<int64_t>(at), from + static_cast<int64_t>(width)};
  return Outcome::kMatch;
}

SimpleRegex::Outcome SimpleRegex::MatchAt(std::string_view text, size_t at, Span* caps) const {
  if (fixed_) {
    const Outcome r = MatchFixedAt(text, at, caps);
    if (r != Outcome::kMatch) caps[0] = Span{};
    return r;
  }
  if (at > text.size()) return Outcome::kNoMatch;
  // Others may leave some groups unset.
  for (int k = 1; k <= captures_; ++k) caps[k] = Span{};
  caps[0] = Span{static_cast<int64_t>(at), -1};
  State s{text, caps, kStepBudget};
  const Outcome r = Start(s, at);
  if (r != Outcome::kMatch) caps[0] = Span{};
  return r;
}

SimpleRegex::Outcome SimpleRegex::Search(std::string_view text, size_t from, Span* caps) const {
  const Elem* first = first_ >= 0 ? &elems_[static_cast<size_t>(first_)] : nullptr;
  int64_t budget = kStepBudget + 64 * static_cast<int64_t>(text.size());
  for (size_t at = from; at <= text.size(); ++at) {
    if (first != nullptr) {
      if (at == text.size()) break;
      const auto c = static_cast<unsigned char>(text[at]);
      if (c < 0x80 ? !first->Has(c) : !first->high) continue;
    }
    for (int k = 0; k <= captures_; ++k) caps[k] = Span{};
    caps[0].begin = static_cast<int64_t>(at);
    State s{text, caps, std::min(budget, kStepBudget)};
    const int64_t given = s.budget;
    const Outcome r = Start(s, at);
    budget -= given - s.budget;
    if (r != Outcome::kNoMatch) {
      if (r != Outcome::kMatch) caps[0] = Span{};
      return r;
    }
    if (budget <= 0) return Outcome::kUnknown;
  }
  caps[0] = Span{};
  return Outcome::kNoMatch;
}

}  // namespace sediment::query
