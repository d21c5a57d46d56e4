// Per-record query functions: filters, expressions and the transform stages.
//
// Choices where LogScale's documentation leaves room:
// - Evaluate: a missing field, a non-numeric operand of arithmetic (`+` on two strings too), a
//   division or modulo by zero and an out-of-range argument give no value. Comparisons with a
//   missing operand give no value. `if`, `!`, `&&` and `||` count no value, 0, "", "false" and
//   numeric text equal to 0 as false. concat() skips arguments without a value.
// - eval / `:=`: an assignment whose value is absent sets nothing and removes nothing.
// - kvParse: pairs are separated by whitespace or ','; an unquoted value ends at whitespace or
//   ','; "..." and '...' quote keys and values, a backslash escapes the quote and itself, an
//   unclosed quote is a plain value. override=false keeps the fields present before the parse;
//   of duplicate keys the last wins.
// - formatTime follows the Java Formatter conventions LogScale documents: %e is not padded, %p is
//   "am"/"pm", %Z is "UTC" or the offset ("+02:00"); %A %B %h %k %l %N %Q %C %D %R are supported
//   too. The source value is milliseconds; without `as` the source field is replaced.
// - length() and substr() count UTF-8 code points; lower()/upper() map ASCII, Latin-1, Latin
//   Extended-A, Greek and Cyrillic letters and leave every other code point as it is.
// - parseJson keeps numbers in their JSON spelling; a root that is not an object or an array,
//   or text that is not one complete JSON value, leaves the record as it was.
// - split(f): f[i] becomes f, f[i].x becomes f.x, f[i][j] becomes f[j]; `_index` = i and `@id`
//   gets "__i" appended; the outputs are rows.
#include "query/transform.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "common/coding.h"
#include "query/text_util.h"

namespace sediment::query {
namespace {

using FK = FilterNode::Kind;
using EK = Expr::Kind;
using SK = Stage::Kind;

// ---- small text helpers ----

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Code points of `s`: every byte that is not a UTF-8 continuation byte starts one.
int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += IsContinuation(static_cast<unsigned char>(c)) ? 0 : 1;
  return n;
}

// Byte offset of code point `cp` of `s` (s.size() when s has fewer).
size_t CodePointOffset(std::string_view s, int64_t cp) {
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (!IsContinuation(static_cast<unsigned char>(s[i]))) {
      if (cp == 0) return i;
      --cp;
    }
  }
  return s.size();
}

// Decodes one well-formed UTF-8 sequence at s[i]; returns its length (0 when malformed).
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xC2 && c < 0xE0 && i + 1 < s.size() && IsContinuation(b(1))) {
    *cp = (uint32_t{c} & 0x1F) << 6 | (b(1) & 0x3F);
    return 2;
  }
  if (c >= 0xE0 && c < 0xF0 && i + 2 < s.size() && IsContinuation(b(1)) && IsContinuation(b(2))) {
    *cp = (uint32_t{c} & 0x0F) << 12 | (uint32_t{b(1)} & 0x3F) << 6 | (b(2) & 0x3F);
    return *cp >= 0x800 ? 3 : 0;
  }
  return 0;  // 4-byte sequences have no case mapping here; copied byte by byte
}

uint32_t LowerCodePoint(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c <= 0x137 && c != 0x130) || (c >= 0x14A && c <= 0x177)) return c | 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
    if (c == 0x178) return 0xFF;
    return c;
  }
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  return c;
}

uint32_t UpperCodePoint(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xE0) return c;
  if (c <= 0xFE) return c == 0xF7 ? c : c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c <= 0x137 && c != 0x131) || (c >= 0x14A && c <= 0x177)) return c & ~uint32_t{1};
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
    return c;
  }
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c == 0x3C2) return 0x3A3;  // final sigma
  if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

std::string MapCase(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(upper ? (c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : s[i])
                          : AsciiLower(s[i]));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      out.push_back(s[i]);
      ++i;
      continue;
    }
    AppendUtf8(upper ? UpperCodePoint(cp) : LowerCodePoint(cp), &out);
    i += len;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Integer text (optional sign, digits only) that fits int64.
std::optional<int64_t> ParseInt(std::string_view s) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Whether `d` is integral and converts to int64 exactly.
bool FitsInt64(double d) {
  return std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 &&
         d < 9223372036854775808.0;
}

// ---- filters ----

bool ContainsIgnoreCase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  if (hay.size() < needle.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (EqualsIgnoreCase(hay.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

bool RegexFound(const std::shared_ptr<const re2::RE2>& re, std::string_view s) {
  return re != nullptr &&
         RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), ThreadLocalRegex(re));
}

// ---- expressions ----

// An intermediate value: a number, a string (owned or a view into the record, which Evaluate
// never modifies), or nothing.
struct Val {
  enum class T : uint8_t { kNone, kInt, kDouble, kView, kOwned };
  T t = T::kNone;
  int64_t i = 0;
  double d = 0;
  std::string_view view;
  std::string s;

  static Val Int(int64_t v) {
    Val x;
    x.t = T::kInt;
    x.i = v;
    return x;
  }
  static Val Double(double v) {
    Val x;
    x.t = T::kDouble;
    x.d = v;
    return x;
  }
  static Val Owned(std::string v) {
    Val x;
    x.t = T::kOwned;
    x.s = std::move(v);
    return x;
  }
  static Val View(std::string_view v) {
    Val x;
    x.t = T::kView;
    x.view = v;
    return x;
  }
  static Val From(Value v) {
    if (auto* i = std::get_if<int64_t>(&v)) return Int(*i);
    if (auto* d = std::get_if<double>(&v)) return Double(*d);
    return Owned(std::move(std::get<std::string>(v)));
  }
  bool none() const { return t == T::kNone; }
  bool is_string() const { return t == T::kView || t == T::kOwned; }
  // Text form; `buf` holds it for numbers.
  std::string_view Text(std::string* buf) const {
    if (t == T::kView) return view;
    if (t == T::kOwned) return s;
    if (t == T::kInt) {
      *buf = std::to_string(i);
    } else if (t == T::kDouble) {
      *buf = ValueToString(Value(d));
    } else {
      buf->clear();
    }
    return *buf;
  }
  std::optional<Value> ToValue() && {
    switch (t) {
      case T::kNone:
        return std::nullopt;
      case T::kInt:
        return Value(i);
      case T::kDouble:
        return Value(d);
      case T::kView:
        return Value(std::string(view));
      case T::kOwned:
        return Value(std::move(s));
    }
    return std::nullopt;
  }
};

// A numeric operand: int64 when the value is an integer (or integer text), else double.
struct Num {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  double AsDouble() const { return is_int ? static_cast<double>(i) : d; }
};

std::optional<Num> ToNum(const Val& v) {
  switch (v.t) {
    case Val::T::kNone:
      return std::nullopt;
    case Val::T::kInt:
      return Num{true, v.i, 0};
    case Val::T::kDouble:
      return Num{false, 0, v.d};
    case Val::T::kView:
    case Val::T::kOwned: {
      std::string_view s = v.t == Val::T::kView ? v.view : std::string_view(v.s);
      if (auto i = ParseInt(s)) return Num{true, *i, 0};
      if (auto d = ParseNumber(s)) return Num{false, 0, *d};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Val FromNum(const Num& n) { return n.is_int ? Val::Int(n.i) : Val::Double(n.d); }

// Integral double results become int64 where exact (round, floor, ceil).
Val IntegralResult(double d) {
  if (FitsInt64(d)) return Val::Int(static_cast<int64_t>(d));
  return Val::Double(d);
}

// Truthiness for if() and the logical operators: no value, 0, "", "false" and numeric text equal
// to 0 are false.
bool Truthy(const Val& v) {
  switch (v.t) {
    case Val::T::kNone:
      return false;
    case Val::T::kInt:
      return v.i != 0;
    case Val::T::kDouble:
      return v.d != 0;
    case Val::T::kView:
    case Val::T::kOwned: {
      std::string_view s = v.t == Val::T::kView ? v.view : std::string_view(v.s);
      if (s.empty() || s == "false") return false;
      if (auto n = ParseNumber(s)) return *n != 0;
      return true;
    }
  }
  return false;
}

Val EvalVal(const Expr& e, const Record& r);

Val FieldVal(const std::string& name, const Record& r) {
  Val v;
  std::optional<std::string_view> s = r.Get(name, &v.s);
  if (!s) return v;
  if (!v.s.empty() && s->data() == v.s.data()) {
    // Get formatted a typed or computed value into the scratch: take the typed value.
    std::optional<Value> typed = r.GetValue(name);
    if (!typed) return Val();
    return Val::From(std::move(*typed));
  }
  v.s.clear();
  v.t = Val::T::kView;
  v.view = *s;
  return v;
}

Val NumberLiteral(const Expr& e) {
  const bool spelled_int = !e.text.empty() && e.text.find_first_of(".eE") == std::string::npos;
  if (spelled_int) {
    if (auto i = ParseInt(e.text)) return Val::Int(*i);
  }
  if (e.text.empty() && FitsInt64(e.number)) return Val::Int(static_cast<int64_t>(e.number));
  return Val::Double(e.number);
}

Val Arith(char op, const Num& a, const Num& b) {
  if (a.is_int && b.is_int) {
    int64_t out = 0;
    switch (op) {
      case '+':
        if (!__builtin_add_overflow(a.i, b.i, &out)) return Val::Int(out);
        break;
      case '-':
        if (!__builtin_sub_overflow(a.i, b.i, &out)) return Val::Int(out);
        break;
      case '*':
        if (!__builtin_mul_overflow(a.i, b.i, &out)) return Val::Int(out);
        break;
      case '/':
        if (b.i == 0) return Val();
        if (!(a.i == std::numeric_limits<int64_t>::min() && b.i == -1) && a.i % b.i == 0) {
          return Val::Int(a.i / b.i);
        }
        break;
      case '%':
        if (b.i == 0) return Val();
        if (b.i == -1) return Val::Int(0);
        return Val::Int(a.i % b.i);
    }
  }
  const double x = a.AsDouble(), y = b.AsDouble();
  switch (op) {
    case '+':
      return Val::Double(x + y);
    case '-':
      return Val::Double(x - y);
    case '*':
      return Val::Double(x * y);
    case '/':
      if (y == 0) return Val();
      return Val::Double(x / y);
    case '%':
      if (y == 0) return Val();
      return Val::Double(std::fmod(x, y));
  }
  return Val();
}

// -1 / 0 / 1: numeric when both are numbers, else bytewise text.
int CompareVals(const Val& a, const Val& b) {
  std::optional<Num> na = ToNum(a), nb = ToNum(b);
  if (na && nb) {
    if (na->is_int && nb->is_int) return na->i < nb->i ? -1 : (na->i > nb->i ? 1 : 0);
    const double x = na->AsDouble(), y = nb->AsDouble();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  std::string ba, bb;
  std::string_view sa = a.Text(&ba), sb = b.Text(&bb);
  return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

Val EvalBinary(const Expr& e, const Record& r) {
  if (e.args.size() != 2 || !e.args[0] || !e.args[1]) return Val();
  const std::string& op = e.text;
  if (op == "&&" || op == "||") {
    const bool left = Truthy(EvalVal(*e.args[0], r));
    if (op == "&&" && !left) return Val::Int(0);
    if (op == "||" && left) return Val::Int(1);
    return Val::Int(Truthy(EvalVal(*e.args[1], r)) ? 1 : 0);
  }
  Val a = EvalVal(*e.args[0], r);
  if (a.none()) return Val();
  Val b = EvalVal(*e.args[1], r);
  if (b.none()) return Val();
  if (op.size() == 1 && std::strchr("+-*/%", op[0]) != nullptr) {
    std::optional<Num> na = ToNum(a), nb = ToNum(b);
    if (!na || !nb) return Val();
    return Arith(op[0], *na, *nb);
  }
  const int c = CompareVals(a, b);
  bool out = false;
  if (op == "==") {
    out = c == 0;
  } else if (op == "!=") {
    out = c != 0;
  } else if (op == "<") {
    out = c < 0;
  } else if (op == "<=") {
    out = c <= 0;
  } else if (op == ">") {
    out = c > 0;
  } else if (op == ">=") {
    out = c >= 0;
  } else {
    return Val();
  }
  return Val::Int(out ? 1 : 0);
}

Val EvalUnary(const Expr& e, const Record& r) {
  if (e.args.size() != 1 || !e.args[0]) return Val();
  Val a = EvalVal(*e.args[0], r);
  if (e.text == "!") return Val::Int(Truthy(a) ? 0 : 1);
  if (e.text != "-") return Val();
  std::optional<Num> n = ToNum(a);
  if (!n) return Val();
  if (n->is_int) {
    if (n->i == std::numeric_limits<int64_t>::min()) return Val::Double(-n->AsDouble());
    return Val::Int(-n->i);
  }
  return Val::Double(-n->d);
}

// An argument that must be an integer (an int, or a double / text with an integral value).
std::optional<int64_t> IntArg(const Val& v) {
  std::optional<Num> n = ToNum(v);
  if (!n) return std::nullopt;
  if (n->is_int) return n->i;
  if (FitsInt64(n->d)) return static_cast<int64_t>(n->d);
  return std::nullopt;
}

enum class Fn {
  kUnknown,
  kLower,
  kUpper,
  kLength,
  kConcat,
  kSubstr,
  kTrim,
  kRound,
  kFloor,
  kCeil,
  kAbs,
  kMin,
  kMax,
  kIf,
  kToString,
  kToNumber,
  kNow,
  kFormatTime,
};

Fn LookupFn(std::string_view name) {
  static constexpr std::pair<std::string_view, Fn> kFns[] = {
      {"lower", Fn::kLower},
      {"upper", Fn::kUpper},
      {"length", Fn::kLength},
      {"concat", Fn::kConcat},
      {"substr", Fn::kSubstr},
      {"trim", Fn::kTrim},
      {"round", Fn::kRound},
      {"floor", Fn::kFloor},
      {"ceil", Fn::kCeil},
      {"abs", Fn::kAbs},
      {"min", Fn::kMin},
      {"max", Fn::kMax},
      {"if", Fn::kIf},
      {"tostring", Fn::kToString},
      {"tonumber", Fn::kToNumber},
      {"now", Fn::kNow},
      {"formattime", Fn::kFormatTime},
  };
  for (const auto& [n, f] : kFns) {
    if (n == name) return f;
  }
  return Fn::kUnknown;
}

std::optional<int32_t> ParseTimezone(std::string_view tz);

Val EvalCall(const Expr& e, const Record& r) {
  const Fn fn = LookupFn(e.text);
  const size_t n = e.args.size();
  for (const ExprPtr& a : e.args) {
    if (!a) return Val();
  }
  auto arg = [&](size_t k) { return EvalVal(*e.args[k], r); };
  std::string buf;
  switch (fn) {
    case Fn::kUnknown:
      return Val();
    case Fn::kLower:
    case Fn::kUpper:
    case Fn::kLength:
    case Fn::kTrim:
    case Fn::kToString: {
      if (n != 1) return Val();
      Val a = arg(0);
      if (a.none()) return Val();
      std::string_view s = a.Text(&buf);
      if (fn == Fn::kLength) return Val::Int(CodePoints(s));
      if (fn == Fn::kTrim) return Val::Owned(std::string(Trim(s)));
      if (fn == Fn::kToString) return Val::Owned(std::string(s));
      return Val::Owned(MapCase(s, fn == Fn::kUpper));
    }
    case Fn::kConcat: {
      std::string out;
      for (size_t k = 0; k < n; ++k) {
        Val a = arg(k);
        if (!a.none()) out.append(a.Text(&buf));
      }
      return Val::Owned(std::move(out));
    }
    case Fn::kSubstr: {
      if (n != 2 && n != 3) return Val();
      Val a = arg(0);
      if (a.none()) return Val();
      std::optional<int64_t> start = IntArg(arg(1));
      if (!start || *start < 0) return Val();
      std::optional<int64_t> len;
      if (n == 3) {
        len = IntArg(arg(2));
        if (!len || *len < 0) return Val();
      }
      std::string_view s = a.Text(&buf);
      if (*start > CodePoints(s)) return Val();
      const size_t b = CodePointOffset(s, *start);
      const size_t end = len ? b + CodePointOffset(s.substr(b), *len) : s.size();
      return Val::Owned(std::string(s.substr(b, end - b)));
    }
    case Fn::kRound:
    case Fn::kFloor:
    case Fn::kCeil:
    case Fn::kAbs:
    case Fn::kToNumber: {
      if (n != 1) return Val();
      std::optional<Num> x = ToNum(arg(0));
      if (!x) return Val();
      if (fn == Fn::kToNumber) return FromNum(*x);
      if (fn == Fn::kAbs) {
        if (!x->is_int) return Val::Double(std::fabs(x->d));
        if (x->i == std::numeric_limits<int64_t>::min()) return Val::Double(-x->AsDouble());
        return Val::Int(x->i < 0 ? -x->i : x->i);
      }
      if (x->is_int) return Val::Int(x->i);
      if (!std::isfinite(x->d)) return Val::Double(x->d);
      const double d = fn == Fn::kRound   ? std::round(x->d)
                       : fn == Fn::kFloor ? std::floor(x->d)
                                          : std::ceil(x->d);
      return IntegralResult(d);
    }
    case Fn::kMin:
    case Fn::kMax: {
      if (n == 0) return Val();
      std::optional<Num> best;
      for (size_t k = 0; k < n; ++k) {
        std::optional<Num> x = ToNum(arg(k));
        if (!x) return Val();
        if (!best) {
          best = x;
          continue;
        }
        const bool less =
            x->is_int && best->is_int ? x->i < best->i : x->AsDouble() < best->AsDouble();
        const bool greater =
            x->is_int && best->is_int ? x->i > best->i : x->AsDouble() > best->AsDouble();
        if (fn == Fn::kMin ? less : greater) best = x;
      }
      return FromNum(*best);
    }
    case Fn::kIf:
      if (n != 3) return Val();
      return Truthy(arg(0)) ? arg(1) : arg(2);
    case Fn::kNow:
      if (n != 0) return Val();
      return Val::Int(std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
    case Fn::kFormatTime: {
      if (n != 2 && n != 3) return Val();
      Val format = arg(0);
      if (format.none()) return Val();
      std::optional<Num> ms = ToNum(arg(1));
      if (!ms) return Val();
      int64_t t = 0;
      if (ms->is_int) {
        t = ms->i;
      } else if (FitsInt64(std::floor(ms->d))) {
        t = static_cast<int64_t>(std::floor(ms->d));
      } else {
        return Val();
      }
      std::string tz_buf;
      std::string_view tz = "UTC";
      Val tzv;
      if (n == 3) {
        tzv = arg(2);
        if (tzv.none()) return Val();
        tz = tzv.Text(&tz_buf);
        if (!ParseTimezone(tz)) return Val();
      }
      return Val::Owned(FormatTime(format.Text(&buf), t, tz));
    }
  }
  return Val();
}

Val EvalVal(const Expr& e, const Record& r) {
  switch (e.kind) {
    case EK::kField:
      return FieldVal(e.text, r);
    case EK::kString:
      return Val::View(e.text);
    case EK::kNumber:
      return NumberLiteral(e);
    case EK::kCall:
      return EvalCall(e, r);
    case EK::kUnary:
      return EvalUnary(e, r);
    case EK::kBinary:
      return EvalBinary(e, r);
  }
  return Val();
}

// ---- time ----

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's algorithms).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Offset in seconds east of UTC: "UTC", "GMT", "Z" (any case), optionally followed by an offset,
// or an offset "+HH", "+HHMM", "+HH:MM" (sign required, at most 18:00).
std::optional<int32_t> ParseTimezone(std::string_view tz) {
  if (tz.size() >= 3 &&
      (EqualsIgnoreCase(tz.substr(0, 3), "utc") || EqualsIgnoreCase(tz.substr(0, 3), "gmt"))) {
    tz.remove_prefix(3);
  } else if (tz.size() == 1 && (tz[0] == 'Z' || tz[0] == 'z')) {
    tz.remove_prefix(1);
  }
  if (tz.empty()) return 0;
  if (tz[0] != '+' && tz[0] != '-') return std::nullopt;
  const int sign = tz[0] == '-' ? -1 : 1;
  tz.remove_prefix(1);
  auto digits2 = [](std::string_view s) -> int {
    if (s.size() < 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9') return -1;
    return (s[0] - '0') * 10 + (s[1] - '0');
  };
  const int h = digits2(tz);
  if (h < 0) return std::nullopt;
  tz.remove_prefix(2);
  int m = 0;
  if (!tz.empty()) {
    if (tz[0] == ':') tz.remove_prefix(1);
    m = digits2(tz);
    if (m < 0 || tz.size() != 2) return std::nullopt;
  }
  if (m >= 60 || h * 60 + m > 18 * 60) return std::nullopt;
  return sign * (h * 3600 + m * 60);
}

void AppendPadded(std::string* out, int64_t v, int width) {
  char buf[24];
  char* end = std::to_chars(buf, buf + sizeof(buf), v < 0 ? -v : v).ptr;
  if (v < 0) out->push_back('-');
  for (int pad = width - static_cast<int>(end - buf); pad > 0; --pad) out->push_back('0');
  out->append(buf, end);
}

constexpr std::string_view kDayShort[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::string_view kDayLong[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};
constexpr std::string_view kMonShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::string_view kMonLong[] = {"January",   "February", "March",    "April",
                                         "May",       "June",     "July",     "August",
                                         "September", "October",  "November", "December"};

// ---- parseJson ----

// Flattens one JSON text into (name, value) pairs; strict RFC 8259 grammar.
class JsonFlattener {
 public:
  JsonFlattener(std::string_view in, std::vector<std::pair<std::string, std::string>>* out)
      : in_(in), out_(out) {}

  // False (with `out` in an unspecified state) unless `in` is one object or array.
  bool Run(const std::string& prefix) {
    SkipWs();
    if (p_ >= in_.size() || (in_[p_] != '{' && in_[p_] != '[')) return false;
    std::string path = prefix;
    if (!ParseValue(&path, /*root=*/true, 0)) return false;
    SkipWs();
    return p_ == in_.size();
  }

 private:
  static constexpr int kMaxDepth = 128;

  void SkipWs() {
    while (p_ < in_.size() &&
           (in_[p_] == ' ' || in_[p_] == '\t' || in_[p_] == '\n' || in_[p_] == '\r')) {
      ++p_;
    }
  }

  bool Literal(std::string_view word) {
    if (in_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool Hex4(uint32_t* v) {
    if (p_ + 4 > in_.size()) return false;
    uint32_t x = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = Hex(in_[p_ + k]);
      if (h < 0) return false;
      x = x << 4 | static_cast<uint32_t>(h);
    }
    p_ += 4;
    *v = x;
    return true;
  }

  // At the opening quote; appends the unescaped string to *s.
  bool String(std::string* s) {
    ++p_;
    while (p_ < in_.size()) {
      const size_t run = p_;
      while (p_ < in_.size() && in_[p_] != '"' && in_[p_] != '\\' &&
             static_cast<unsigned char>(in_[p_]) >= 0x20) {
        ++p_;
      }
      s->append(in_.data() + run, p_ - run);
      if (p_ >= in_.size()) return false;
      const char c = in_[p_];
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c != '\\') return false;  // control character
      if (++p_ >= in_.size()) return false;
      const char esc = in_[p_++];
      switch (esc) {
        case '"':
        case '\\':
        case '/':
          s->push_back(esc);
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo = 0;
            if (p_ + 1 < in_.size() && in_[p_] == '\\' && in_[p_ + 1] == 'u') {
              const size_t save = p_;
              p_ += 2;
              if (Hex4(&lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              } else {
                p_ = save;
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          AppendUtf8(cp, s);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool Number(std::string* s) {
    const size_t start = p_;
    auto digits = [&] {
      const size_t b = p_;
      while (p_ < in_.size() && in_[p_] >= '0' && in_[p_] <= '9') ++p_;
      return p_ > b;
    };
    if (p_ < in_.size() && in_[p_] == '-') ++p_;
    if (p_ < in_.size() && in_[p_] == '0') {
      ++p_;
    } else if (!digits()) {
      return false;
    }
    if (p_ < in_.size() && in_[p_] == '.') {
      ++p_;
      if (!digits()) return false;
    }
    if (p_ < in_.size() && (in_[p_] == 'e' || in_[p_] == 'E')) {
      ++p_;
      if (p_ < in_.size() && (in_[p_] == '+' || in_[p_] == '-')) ++p_;
      if (!digits()) return false;
    }
    s->assign(in_.substr(start, p_ - start));
    return true;
  }

  void Emit(const std::string& path, std::string value) {
    out_->emplace_back(path, std::move(value));
  }

  // One value named *path (objects extend it with ".key", or "key" at the root; arrays with
  // "[i]").
  bool ParseValue(std::string* path, bool root, int depth) {
    if (depth > kMaxDepth) return false;
    SkipWs();
    if (p_ >= in_.size()) return false;
    const char c = in_[p_];
    if (c == '{' || c == '[') {
      const bool object = c == '{';
      ++p_;
      SkipWs();
      if (p_ < in_.size() && in_[p_] == (object ? '}' : ']')) {
        ++p_;
        if (!root) Emit(*path, object ? "{}" : "[]");
        return true;
      }
      const size_t base = path->size();
      for (size_t index = 0;; ++index) {
        if (object) {
          SkipWs();
          if (p_ >= in_.size() || in_[p_] != '"') return false;
          if (!root) path->push_back('.');
          if (!String(path)) return false;
          SkipWs();
          if (p_ >= in_.size() || in_[p_] != ':') return false;
          ++p_;
        } else {
          char buf[24];
          path->push_back('[');
          path->append(buf, std::to_chars(buf, buf + sizeof(buf), index).ptr);
          path->push_back(']');
        }
        if (!ParseValue(path, false, depth + 1)) return false;
        path->resize(base);
        SkipWs();
        if (p_ >= in_.size()) return false;
        if (in_[p_] == ',') {
          ++p_;
          continue;
        }
        if (in_[p_] == (object ? '}' : ']')) {
          ++p_;
          return true;
        }
        return false;
      }
    }
    std::string v;
    if (c == '"') {
      if (!String(&v)) return false;
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (!Literal(word)) return false;
      v.assign(word);
    } else if (!Number(&v)) {
      return false;
    }
    Emit(*path, std::move(v));
    return true;
  }

  std::string_view in_;
  size_t p_ = 0;
  std::vector<std::pair<std::string, std::string>>* out_;
};

// ---- kvParse ----

bool KvDelimiter(char c) { return IsSpace(c) || c == ','; }

// A quoted run at s[*i] (the quote); false (with *i unchanged) when the quote is not closed.
// Backslash escapes the quote and itself; other backslashes are kept.
bool KvQuoted(std::string_view s, size_t* i, std::string* out) {
  const char q = s[*i];
  std::string v;
  for (size_t k = *i + 1; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '\\' && k + 1 < s.size() && (s[k + 1] == q || s[k + 1] == '\\')) {
      v.push_back(s[++k]);
    } else if (c == q) {
      *i = k + 1;
      *out = std::move(v);
      return true;
    } else {
      v.push_back(c);
    }
  }
  return false;
}

void KvPairs(std::string_view s, std::vector<std::pair<std::string, std::string>>* out) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && KvDelimiter(s[i])) ++i;
    if (i >= n) break;
    std::string key;
    if (s[i] == '"' || s[i] == '\'') {
      size_t k = i;
      const bool closed = KvQuoted(s, &k, &key);
      if (!closed || k >= n || s[k] != '=') {
        i = closed ? k : i + 1;  // a quoted word that is not a key
        continue;
      }
      i = k;
    } else {
      const size_t start = i;
      while (i < n && s[i] != '=' && !KvDelimiter(s[i])) ++i;
      if (i >= n || s[i] != '=') continue;  // a word that is not a key
      key.assign(s.substr(start, i - start));
    }
    ++i;  // '='
    std::string value;
    if (i < n && (s[i] == '"' || s[i] == '\'') && KvQuoted(s, &i, &value)) {
      // quoted value consumed
    } else {
      const size_t start = i;
      while (i < n && !KvDelimiter(s[i])) ++i;
      value.assign(s.substr(start, i - start));
    }
    if (!key.empty()) out->emplace_back(std::move(key), std::move(value));
  }
}

// ---- stages ----

const std::string& FieldOr(const std::string& field, const std::string& fallback) {
  return field.empty() ? fallback : field;
}

const std::string kRawstring = "@rawstring";
const std::string kTimestamp = "@timestamp";
const std::string kLengthOut = "_length";
const std::string kEvents = "_events";

// Leftmost match of `re` in `input` with `nsub` submatches. With a `prefix` (every match starts
// with these bytes) it tries anchored matches only where the prefix occurs, which RE2 runs as a
// one-pass or bounded match instead of a search over the whole text; the first anchored match is
// the leftmost one, with the same groups. After a few failed anchored matches it searches the
// rest unanchored.
bool MatchGroups(const RE2& re, std::string_view prefix, const re2::StringPiece& input,
                 re2::StringPiece* sub, int nsub) {
  size_t from = 0;
  if (!prefix.empty()) {
    constexpr int kMaxCandidates = 8;
    const char* const begin = input.data();
    const char* const end = begin + input.size();
    const char* p = begin;
    int tries = 0;
    for (;;) {
      if (static_cast<size_t>(end - p) < prefix.size()) return false;
      p = static_cast<const char*>(
          std::memchr(p, prefix[0], static_cast<size_t>(end - p) - (prefix.size() - 1)));
      if (p == nullptr) return false;
      size_t n = 1;  // prefixes are short: compare in place rather than call memcmp
      while (n < prefix.size() && p[n] == prefix[n]) ++n;
      if (n == prefix.size()) {
        const size_t at = static_cast<size_t>(p - begin);
        if (re.Match(input, at, input.size(), RE2::ANCHOR_START, sub, nsub)) return true;
        if (++tries == kMaxCandidates) {
          from = at + 1;
          break;
        }
      }
      ++p;
    }
  }
  return re.Match(input, from, input.size(), RE2::UNANCHORED, sub, nsub);
}

// False when the record is dropped (strict and no match).
bool ApplyRegex(const Stage& st, Record& r) {
  if (!st.re) return true;
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstring), &scratch);
  if (!text) return !st.strict;
  // The groups are set on the record, which may move the text when it is a field a stage set:
  // then match a copy. Text in the decoded block or in `scratch` stays put.
  std::string owned;
  const auto inside = [](std::string_view s, std::string_view in) {
    return !in.empty() && s.data() >= in.data() && s.data() + s.size() <= in.data() + in.size();
  };
  if (!inside(*text, scratch) && !(r.is_event() && inside(*text, r.event().block->buffer))) {
    owned.assign(*text);
    text = owned;
  }
  const RE2& re = ThreadLocalRegex(st.re);
  // The capture index of each output group (-1: not a group of the regex).
  constexpr size_t kInline = 8;
  std::vector<int> looked_up;
  const int* index = st.group_index.data();
  if (st.group_index.size() != st.groups.size()) {
    looked_up = RegexGroupIndexes(re, st.groups);
    index = looked_up.data();
  }
  int nsub = 1;
  for (size_t k = 0; k < st.groups.size(); ++k) nsub = std::max(nsub, index[k] + 1);
  re2::StringPiece inline_sub[kInline];
  std::vector<re2::StringPiece> more_sub;
  re2::StringPiece* sub = inline_sub;
  if (nsub > static_cast<int>(kInline)) {
    more_sub.resize(static_cast<size_t>(nsub));
    sub = more_sub.data();
  }
  const re2::StringPiece input(text->data(), text->size());
  if (!MatchGroups(re, st.regex_prefix, input, sub, nsub)) return !st.strict;
  for (size_t k = 0; k < st.groups.size(); ++k) {
    if (index[k] < 0) continue;
    const re2::StringPiece& m = sub[index[k]];
    if (m.data() == nullptr) continue;  // optional group that did not take part
    r.Set(st.groups[k], Value(std::string(m.data(), m.size())));
  }
  return true;
}

void ApplyParseJson(const Stage& st, Record& r) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstring), &scratch);
  if (!text) return;
  std::vector<std::pair<std::string, std::string>> fields;
  JsonFlattener f(*text, &fields);
  if (!f.Run(st.prefix)) return;
  for (auto& [k, v] : fields) r.Set(k, Value(std::move(v)));
}

void ApplyKvParse(const Stage& st, Record& r) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstring), &scratch);
  if (!text) return;
  std::vector<std::pair<std::string, std::string>> pairs;
  KvPairs(*text, &pairs);
  if (pairs.empty()) return;
  std::vector<uint8_t> keep(pairs.size(), 1);
  if (!st.override_fields) {
    for (size_t k = 0; k < pairs.size(); ++k) keep[k] = r.Has(pairs[k].first) ? 0 : 1;
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (keep[k]) r.Set(pairs[k].first, Value(std::move(pairs[k].second)));
  }
}

void ApplyFormatTime(const Stage& st, Record& r) {
  const std::string& field = FieldOr(st.field, kTimestamp);
  std::optional<Value> v = r.GetValue(field);
  if (!v) return;
  int64_t ms = 0;
  std::optional<int64_t> exact;
  if (const auto* i = std::get_if<int64_t>(&v.value())) {
    exact = *i;
  } else if (const auto* s = std::get_if<std::string>(&v.value())) {
    exact = ParseInt(*s);
  }
  if (exact) {
    ms = *exact;
  } else {
    std::optional<double> d = ValueToNumber(*v);
    if (!d || !FitsInt64(std::floor(*d))) return;
    ms = static_cast<int64_t>(std::floor(*d));
  }
  r.Set(FieldOr(st.as, field), Value(FormatTime(st.format, ms, st.timezone)));
}

void ApplySplit(const Stage& st, Record&& r, std::vector<Record>* out) {
  const std::string& field = FieldOr(st.field, kEvents);
  Row row = r.ToRow();
  const std::string open = field + "[";
  // index -> (suffix after "f[i]", value)
  std::map<int64_t, std::vector<std::pair<std::string, Value>>> elements;
  Row base;
  base.reserve(row.size());
  for (auto& [name, value] : row) {
    if (name.size() > open.size() && name.compare(0, open.size(), open) == 0) {
      const size_t close = name.find(']', open.size());
      if (close != std::string::npos) {
        std::optional<int64_t> idx =
            ParseInt(std::string_view(name).substr(open.size(), close - open.size()));
        if (idx && *idx >= 0 && name[open.size()] >= '0' && name[open.size()] <= '9') {
          elements[*idx].emplace_back(name.substr(close + 1), std::move(value));
          continue;
        }
      }
    }
    if (name == field) continue;
    base.emplace_back(std::move(name), std::move(value));
  }
  if (elements.empty()) {
    out->push_back(std::move(r));
    return;
  }
  std::optional<std::string> id;
  for (const auto& [name, value] : base) {
    if (name == "@id") id = ValueToString(value);
  }
  for (auto& [idx, fields] : elements) {
    Record rec = Record::FromRow(base, r.key());
    for (auto& [suffix, value] : fields) {
      // strip: "f[i].x" becomes "x" (the element itself keeps the name f).
      if (st.strip && suffix.size() > 1 && suffix[0] == '.') {
        rec.Set(std::string_view(suffix).substr(1), std::move(value));
      } else {
        rec.Set(field + suffix, std::move(value));
      }
    }
    rec.Set("_index", Value(idx));
    if (id) rec.Set("@id", Value(*id + "__" + std::to_string(idx)));
    out->push_back(std::move(rec));
  }
}

void ApplySelect(const Stage& st, Record& r) {
  Row row;
  row.reserve(st.fields.size());
  for (const std::string& f : st.fields) {
    bool dup = false;
    for (const auto& [k, v] : row) dup = dup || k == f;
    if (dup) continue;
    if (std::optional<Value> v = r.GetValue(f)) row.emplace_back(f, std::move(*v));
  }
  r = Record::FromRow(std::move(row), r.key());
}

void ApplyCase(const Stage& st, Record&& r, std::vector<Record>* out) {
  for (const CaseBranch& b : st.branches) {
    if (b.condition && !Matches(*b.condition, r)) continue;
    if (b.stages.empty()) {
      out->push_back(std::move(r));
      return;
    }
    if (b.stages.size() == 1) {
      ApplyTransform(b.stages[0], std::move(r), out);
      return;
    }
    std::vector<Record> cur, next;
    cur.push_back(std::move(r));
    for (size_t s = 0; s < b.stages.size(); ++s) {
      std::vector<Record>* dst = s + 1 == b.stages.size() ? out : &next;
      for (Record& rec : cur) ApplyTransform(b.stages[s], std::move(rec), dst);
      cur.swap(next);
      next.clear();
    }
    return;
  }
}

}  // namespace

bool Matches(const FilterNode& f, const Record& r) {
  switch (f.kind) {
    case FK::kTrue:
      return true;
    case FK::kFalse:
      return false;
    case FK::kAnd:
      for (const FilterPtr& c : f.children) {
        if (c && !Matches(*c, r)) return false;
      }
      return true;
    case FK::kOr:
      for (const FilterPtr& c : f.children) {
        if (c && Matches(*c, r)) return true;
      }
      return false;
    case FK::kNot:
      return f.children.empty() || !f.children[0] ? false : !Matches(*f.children[0], r);
    default:
      break;
  }
  std::string scratch;
  if (f.kind == FK::kText || f.kind == FK::kTextGlob || f.kind == FK::kRawRegex) {
    std::optional<std::string_view> raw = r.Get(kRawstring, &scratch);
    if (!raw) return false;
    if (f.kind == FK::kText) {
      return f.searcher ? f.searcher->Contains(*raw) : ContainsIgnoreCase(*raw, f.text);
    }
    if (f.kind == FK::kTextGlob) return GlobPiecesInOrder(f.pieces, *raw);
    return RegexFound(f.re, *raw);
  }
  if (f.kind == FK::kFieldCmp) {
    std::optional<double> v = r.GetNumber(f.field);
    return v && CompareNumbers(*v, f.cmp, f.number);
  }
  std::optional<std::string_view> v = r.Get(f.field, &scratch);
  if (!v) return false;
  switch (f.kind) {
    case FK::kFieldEq:
      return f.ignore_case ? EqualsIgnoreCase(*v, f.text) : *v == f.text;
    case FK::kFieldGlob:
      return f.ignore_case ? GlobMatchIgnoreCase(f.text, *v) : GlobMatch(f.text, *v);
    case FK::kFieldRegex:
      return RegexFound(f.re, *v);
    default:
      return false;
  }
}

std::optional<Value> Evaluate(const Expr& e, const Record& r) { return EvalVal(e, r).ToValue(); }

bool EmitsOneOrNone(const Stage& st) {
  return st.IsTransform() && st.kind != SK::kCase && st.kind != SK::kSplit;
}

bool ApplyTransformInPlace(const Stage& st, Record& r) {
  switch (st.kind) {
    case SK::kFilter:
      return !st.filter || Matches(*st.filter, r);
    case SK::kEval:
      for (const auto& [target, expr] : st.assignments) {
        if (!expr) continue;
        if (std::optional<Value> v = Evaluate(*expr, r)) r.Set(target, std::move(*v));
      }
      return true;
    case SK::kRegex:
      return ApplyRegex(st, r);
    case SK::kParseJson:
      ApplyParseJson(st, r);
      return true;
    case SK::kKvParse:
      ApplyKvParse(st, r);
      return true;
    case SK::kFormatTime:
      ApplyFormatTime(st, r);
      return true;
    case SK::kLower: {
      std::string scratch;
      if (std::optional<std::string_view> v = r.Get(st.field, &scratch)) {
        std::string lowered = MapCase(*v, /*upper=*/false);
        r.Set(FieldOr(st.as, st.field), Value(std::move(lowered)));
      }
      return true;
    }
    case SK::kLength: {
      std::string scratch;
      if (std::optional<std::string_view> v = r.Get(FieldOr(st.field, kRawstring), &scratch)) {
        const int64_t n = CodePoints(*v);
        r.Set(FieldOr(st.as, kLengthOut), Value(n));
      }
      return true;
    }
    case SK::kDrop:
      for (const std::string& f : st.fields) r.Remove(f);
      return true;
    case SK::kRename:
      for (const auto& [from, to] : st.renames) {
        if (from == to) continue;
        std::optional<Value> v = r.GetValue(from);
        if (!v) continue;
        r.Remove(from);
        r.Set(to, std::move(*v));
      }
      return true;
    case SK::kSelect:
      ApplySelect(st, r);
      return true;
    default:
      // kCase and kSplit go through ApplyTransform; not a transform: the record passes unchanged.
      return true;
  }
}

void ApplyTransform(const Stage& st, Record&& r, std::vector<Record>* out) {
  switch (st.kind) {
    case SK::kCase:
      ApplyCase(st, std::move(r), out);
      return;
    case SK::kSplit:
      ApplySplit(st, std::move(r), out);
      return;
    default:
      if (ApplyTransformInPlace(st, r)) out->push_back(std::move(r));
      return;
  }
}

const re2::RE2& ThreadLocalRegex(const std::shared_ptr<const re2::RE2>& re) {
  struct Entry {
    std::shared_ptr<const re2::RE2> original;  // keeps the address from being reused
    std::unique_ptr<re2::RE2> copy;
  };
  constexpr size_t kMaxEntries = 32;
  thread_local std::vector<Entry> cache;
  for (const Entry& e : cache) {
    if (e.original.get() == re.get()) return *e.copy;
  }
  auto copy = std::make_unique<re2::RE2>(re->pattern(), re->options());
  if (!copy->ok()) return *re;
  if (cache.size() >= kMaxEntries) cache.erase(cache.begin());
  cache.push_back(Entry{re, std::move(copy)});
  return *cache.back().copy;
}

std::string FormatTime(std::string_view format, int64_t ms, std::string_view timezone) {
  const int32_t offset = ParseTimezone(timezone).value_or(0);
  const int64_t secs_utc = FloorDiv(ms, 1000);
  const int64_t millis = FloorMod(ms, 1000);
  const int64_t secs = secs_utc + offset;
  const int64_t days = FloorDiv(secs, 86400);
  const int64_t sod = FloorMod(secs, 86400);
  int64_t year = 0;
  unsigned month = 0, mday = 0;
  CivilFromDays(days, &year, &month, &mday);
  const int64_t hour = sod / 3600, minute = sod / 60 % 60, second = sod % 60;
  const int64_t wday = FloorMod(days + 4, 7);  // 1970-01-01 was a Thursday
  const int64_t yday = days - DaysFromCivil(year, 1, 1) + 1;
  const int64_t hour12 = hour % 12 == 0 ? 12 : hour % 12;

  std::string out;
  out.reserve(format.size() + 16);
  auto zone_offset = [&](bool colon) {
    const int32_t a = offset < 0 ? -offset : offset;
    out.push_back(offset < 0 ? '-' : '+');
    AppendPadded(&out, a / 3600, 2);
    if (colon) out.push_back(':');
    AppendPadded(&out, a / 60 % 60, 2);
  };
  auto year4 = [&] { AppendPadded(&out, year, 4); };
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c != '%' || i + 1 == format.size()) {
      out.push_back(c);
      continue;
    }
    const char conv = format[++i];
    switch (conv) {
      case 'Y':
        year4();
        break;
      case 'C':
        AppendPadded(&out, FloorDiv(year, 100), 2);
        break;
      case 'y':
        AppendPadded(&out, FloorMod(year, 100), 2);
        break;
      case 'm':
        AppendPadded(&out, month, 2);
        break;
      case 'd':
        AppendPadded(&out, mday, 2);
        break;
      case 'e':
        AppendPadded(&out, mday, 1);
        break;
      case 'j':
        AppendPadded(&out, yday, 3);
        break;
      case 'H':
        AppendPadded(&out, hour, 2);
        break;
      case 'k':
        AppendPadded(&out, hour, 1);
        break;
      case 'I':
        AppendPadded(&out, hour12, 2);
        break;
      case 'l':
        AppendPadded(&out, hour12, 1);
        break;
      case 'M':
        AppendPadded(&out, minute, 2);
        break;
      case 'S':
        AppendPadded(&out, second, 2);
        break;
      case 'L':
        AppendPadded(&out, millis, 3);
        break;
      case 'N':
        AppendPadded(&out, millis * 1000000, 9);
        break;
      case 'p':
        out.append(hour < 12 ? "am" : "pm");
        break;
      case 'a':
        out.append(kDayShort[wday]);
        break;
      case 'A':
        out.append(kDayLong[wday]);
        break;
      case 'b':
      case 'h':
        out.append(kMonShort[month - 1]);
        break;
      case 'B':
        out.append(kMonLong[month - 1]);
        break;
      case 'Z':
        if (offset == 0) {
          out.append("UTC");
        } else {
          zone_offset(true);
        }
        break;
      case 'z':
        zone_offset(false);
        break;
      case 's':
        AppendPadded(&out, secs_utc, 1);
        break;
      case 'Q':
        AppendPadded(&out, ms, 1);
        break;
      case 'F':
        year4();
        out.push_back('-');
        AppendPadded(&out, month, 2);
        out.push_back('-');
        AppendPadded(&out, mday, 2);
        break;
      case 'D':
        AppendPadded(&out, month, 2);
        out.push_back('/');
        AppendPadded(&out, mday, 2);
        out.push_back('/');
        AppendPadded(&out, FloorMod(year, 100), 2);
        break;
      case 'T':
      case 'R':
        AppendPadded(&out, hour, 2);
        out.push_back(':');
        AppendPadded(&out, minute, 2);
        if (conv == 'T') {
          out.push_back(':');
          AppendPadded(&out, second, 2);
        }
        break;
      case '%':
        out.push_back('%');
        break;
      default:
        out.push_back('%');
        out.push_back(conv);
        break;
    }
  }
  return out;
}

}  // namespace sediment::query
