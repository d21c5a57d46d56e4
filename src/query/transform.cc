// Per-record query functions: filters, expressions and the dispatch of the transform stages
// (the bigger ones are implemented in their function's file, functions/*.cc: see
// functions/transforms.h).
//
// Choices where LogScale's documentation leaves room:
// - Evaluate: a missing field, a non-numeric operand of arithmetic (`+` on two strings too), a
//   division or modulo by zero and an out-of-range argument give no value. Comparisons with a
//   missing operand give no value. `if`, `!`, `&&` and `||` count no value, 0, "", "false" and
//   numeric text equal to 0 as false. concat() skips arguments without a value.
// - eval / `:=`: an assignment whose value is absent sets nothing and removes nothing.
// - length() and substr() count UTF-8 code points; lower()/upper() map ASCII, Latin-1, Latin
//   Extended-A, Greek and Cyrillic letters and leave every other code point as it is.
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
#include "query/functions/transforms.h"
#include "query/functions/util.h"
#include "query/lookup.h"
#include "query/text_util.h"

namespace sediment::query {
namespace {

using FK = FilterNode::Kind;
using EK = Expr::Kind;
using SK = Stage::Kind;
using functions::FieldOr;
using functions::FitsInt64;
using functions::ParseInt;

const std::string& kRawstring = functions::kRawstringField;
const std::string kLengthOut = "_length";

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

// ---- filters ----

bool ContainsIgnoreCase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  if (hay.size() < needle.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (EqualsIgnoreCase(hay.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

// Whether the regex of a kRawRegex / kFieldRegex node occurs in `s`: its prefilter first, RE2
// only when that admits `s`.
bool RegexFound(const FilterNode& f, std::string_view s) {
  return f.re != nullptr && PrefilterAdmits(f.regex_prefilter, s) &&
         RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), ThreadLocalRegex(f.re));
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
  kDuration,
  kGetField,
  kFormatDuration,
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
      {"duration", Fn::kDuration},
      {"getfield", Fn::kGetField},
      {"formatduration", Fn::kFormatDuration},
  };
  for (const auto& [n, f] : kFns) {
    if (n == name) return f;
  }
  return Fn::kUnknown;
}

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
    case Fn::kDuration: {
      // duration("5m"): the span in milliseconds (a span functions::ParseSpan reads).
      if (n != 1) return Val();
      Val a = arg(0);
      if (a.none()) return Val();
      std::optional<int64_t> ms = functions::ParseSpan(a.Text(&buf));
      if (!ms) return Val();
      return Val::Int(*ms);
    }
    case Fn::kFormatDuration: {
      // formatDuration(ms): as the formatDuration() step with its defaults.
      if (n != 1) return Val();
      std::optional<int64_t> ms = IntArg(arg(0));
      if (!ms) return Val();
      return Val::Owned(functions::FormatDurationMs(*ms));
    }
    case Fn::kGetField: {
      // getField(name): the value of the field whose name is the argument's value.
      if (n != 1) return Val();
      Val a = arg(0);
      if (a.none()) return Val();
      return FieldVal(std::string(a.Text(&buf)), r);
    }
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
        if (!TimeZone::Parse(tz)) return Val();
      }
      return Val::Owned(FormatTime(format.Text(&buf), t, tz));
    }
  }
  return Val();
}

Val EvalStage(const Expr& e, const Record& r) {
  Record copy = r;
  const bool kept = ApplyTransformInPlace(*e.stage, copy);
  if (e.text.empty()) return Val::Int(kept ? 1 : 0);
  if (!kept) return Val();
  std::optional<Value> v = copy.GetValue(e.text);
  return v ? Val::From(std::move(*v)) : Val();
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
    case EK::kStage:
      return EvalStage(e, r);
  }
  return Val();
}

// ---- stages ----

// Whether `stages` may drop a record (filters, strict regex()/match(), functions that filter,
// nested case): then a case branch may produce nothing and the next branch is tried. A branch
// with dropEvent() never hands its records on: dropEvent() drops what reaches it (LogScale's
// `case { @rawstring="#*" | dropEvent() ; * }` drops the comment lines).
bool MayDrop(const std::vector<Stage>& stages) {
  for (const Stage& s : stages) {
    if (s.function == "dropEvent") return false;
  }
  for (const Stage& s : stages) {
    switch (s.kind) {
      case SK::kFilter:
      case SK::kRegex:
      case SK::kMatch:
      case SK::kFunction:
      case SK::kCase:
        return true;
      default:
        break;
    }
  }
  return false;
}

// Runs the stages of branch `b` on `r`, appending its output to *out.
void ApplyBranch(const CaseBranch& b, Record&& r, std::vector<Record>* out) {
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
}

// The first branch whose condition matches and whose stages give at least one record (LogScale:
// a clause matches when it returns events); no such branch drops the record.
void ApplyCase(const Stage& st, Record&& r, std::vector<Record>* out) {
  for (size_t i = 0; i < st.branches.size(); ++i) {
    const CaseBranch& b = st.branches[i];
    if (b.condition && !Matches(*b.condition, r)) continue;
    if (i + 1 == st.branches.size() || !MayDrop(b.stages)) {
      ApplyBranch(b, std::move(r), out);
      return;
    }
    const size_t before = out->size();
    Record copy = r;  // the branch may drop it: keep the original for the next branches
    ApplyBranch(b, std::move(copy), out);
    if (out->size() > before) return;
  }
}

}  // namespace

namespace functions {
std::string MapCaseText(std::string_view s, bool upper) { return MapCase(s, upper); }
}  // namespace functions

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
    return RegexFound(f, *raw);
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
      return RegexFound(f, *v);
    default:
      return false;
  }
}

std::optional<Value> Evaluate(const Expr& e, const Record& r) { return EvalVal(e, r).ToValue(); }

void RecordFunction::ApplyMany(Record&& r, std::vector<Record>* out) const {
  if (Apply(r)) out->push_back(std::move(r));
}

bool EmitsOneOrNone(const Stage& st) {
  return st.IsTransform() && st.kind != SK::kCase && st.kind != SK::kSplit &&
         !st.function_emits_many && !(st.kind == SK::kRegex && st.repeat_limit > 0);
}

namespace {

bool ApplyOne(const Stage& st, Record& r) {
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
      return functions::ApplyRegex(st, r);
    case SK::kParseJson:
      functions::ApplyParseJson(st, r);
      return true;
    case SK::kKvParse:
      functions::ApplyKvParse(st, r);
      return true;
    case SK::kFormatTime:
      functions::ApplyFormatTime(st, r);
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
      functions::ApplySelect(st, r);
      return true;
    case SK::kMatch:
      return ApplyMatch(st, r);
    case SK::kFunction:
      return !st.record_function || st.record_function->Apply(r);
    default:
      // kCase and kSplit go through ApplyTransform; not a transform: the record passes unchanged.
      return true;
  }
}

}  // namespace

bool ApplyTransformInPlace(const Stage& st, Record& r) {
  if (st.negate) {
    Record copy = r;
    return !ApplyOne(st, copy);
  }
  return ApplyOne(st, r);
}

void ApplyTransform(const Stage& st, Record&& r, std::vector<Record>* out) {
  switch (st.kind) {
    case SK::kCase:
      ApplyCase(st, std::move(r), out);
      return;
    case SK::kSplit:
      functions::ApplySplit(st, std::move(r), out);
      return;
    case SK::kRegex:
      if (st.repeat_limit > 0) {
        functions::ApplyRegexRepeat(st, std::move(r), out);
        return;
      }
      if (ApplyTransformInPlace(st, r)) out->push_back(std::move(r));
      return;
    case SK::kFunction:
      if (st.function_emits_many && st.record_function && !st.negate) {
        st.record_function->ApplyMany(std::move(r), out);
        return;
      }
      if (ApplyTransformInPlace(st, r)) out->push_back(std::move(r));
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

}  // namespace sediment::query
