// format(format, field, as=_format, timezone=UTC): the values of fields formatted printf-style
// (Java Formatter conventions, as LogScale documents) into one field. A per-record stage.
//
// Choices where LogScale's documentation leaves room: the format is checked when the query is
// compiled (an unknown conversion, or a reference to a value past the end of `field`, is a 400);
// when a value a conversion uses is missing, or is not a number where a number is expected
// (%d %x %o %c with text, %d with a fraction), the output field is not set. %t / %T take
// milliseconds since the epoch and a conversion letter of formatTime() (%tY, %tF, %tT, ...).
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/coding.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"
#include "query/time_zone.h"
#include "query/transform.h"

namespace sediment::query::functions {
std::optional<int64_t> IntegerOf(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) {
    return FitsInt64(*d) ? std::optional<int64_t>(static_cast<int64_t>(*d)) : std::nullopt;
  }
  const std::string& s = std::get<std::string>(v);
  if (auto i = ParseInt(s)) return i;
  if (auto d = ParseNumber(s); d && FitsInt64(*d)) return static_cast<int64_t>(*d);
  return std::nullopt;
}

namespace {

constexpr Param kParams[] = {
    {.name = "format", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kFields, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_format"},
    {.name = "timezone", .type = Type::kString, .default_value = "UTC"},
};

// One piece of a parsed format: literal text, or a conversion of argument `arg`.
struct Piece {
  std::string literal;  // when conv == 0
  char conv = 0;        // s S d x X o f e E g G c b t (T is t with upper)
  char time_conv = 0;   // conv == 't'
  bool upper = false;   // S X E G T
  size_t arg = 0;       // index into the fields
  std::string flags;    // of - # + ' ' 0 ,
  int width = -1;
  int precision = -1;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Piece LiteralPiece(std::string text) {
  Piece p;
  p.literal = std::move(text);
  return p;
}

// Parses `f` into pieces; "" on success, else what is wrong.
std::string ParseFormat(std::string_view f, size_t nargs, std::vector<Piece>* out) {
  size_t next_arg = 0;
  std::string lit;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      lit.push_back(f[i]);
      continue;
    }
    if (++i >= f.size()) return "a '%' ends the format";
    if (f[i] == '%') {
      lit.push_back('%');
      continue;
    }
    if (f[i] == 'n') {
      lit.push_back('\n');
      continue;
    }
    if (!lit.empty()) {
      out->push_back(LiteralPiece(std::move(lit)));
      lit.clear();
    }
    Piece p;
    // An explicit argument index "n$".
    size_t j = i;
    while (j < f.size() && IsDigit(f[j])) ++j;
    std::optional<size_t> index;
    if (j > i && j < f.size() && f[j] == '$') {
      size_t n = 0;
      std::from_chars(f.data() + i, f.data() + j, n);
      if (n == 0) return "argument index 0";
      index = n - 1;
      i = j + 1;
    }
    while (i < f.size() && std::string_view("-#+ 0,").find(f[i]) != std::string_view::npos) {
      p.flags.push_back(f[i++]);
    }
    if (i < f.size() && IsDigit(f[i])) {
      p.width = 0;
      while (i < f.size() && IsDigit(f[i])) {
        p.width = std::min(p.width * 10 + (f[i++] - '0'), 1000);
      }
    }
    if (i < f.size() && f[i] == '.') {
      ++i;
      p.precision = 0;
      if (i >= f.size() || !IsDigit(f[i])) return "a precision without digits";
      while (i < f.size() && IsDigit(f[i])) {
        p.precision = std::min(p.precision * 10 + (f[i++] - '0'), 1000);
      }
    }
    if (i >= f.size()) return "an unfinished conversion at the end";
    const char c = f[i];
    switch (c) {
      case 's':
      case 'd':
      case 'x':
      case 'o':
      case 'f':
      case 'e':
      case 'g':
      case 'c':
      case 'b':
        p.conv = c;
        break;
      case 'S':
      case 'X':
      case 'E':
      case 'G':
      case 'C':
      case 'B':
        p.conv = AsciiLower(c);
        p.upper = true;
        break;
      case 't':
      case 'T':
        p.conv = 't';
        p.upper = c == 'T';
        if (++i >= f.size()) return "%t without a time conversion";
        if (std::string_view("YCymdejHkIlMSLNpaAbhBZzsQFDTR").find(f[i]) ==
            std::string_view::npos) {
          return "an unknown time conversion '%" + std::string(1, c) + f[i] + "'";
        }
        p.time_conv = f[i];
        break;
      default:
        return "an unknown conversion '%" + std::string(1, c) + "'";
    }
    p.arg = index ? *index : next_arg++;
    if (p.arg >= nargs) {
      return "conversion '%" + std::string(1, c) + "' needs value " + std::to_string(p.arg + 1) +
             " but field has " + std::to_string(nargs);
    }
    out->push_back(std::move(p));
  }
  if (!lit.empty()) out->push_back(LiteralPiece(std::move(lit)));
  return "";
}

bool Has(const Piece& p, char flag) { return p.flags.find(flag) != std::string::npos; }

// Pads `s` to the piece's width (left-justified with '-'); `zero_ok` pads numbers with zeros
// after their sign with the '0' flag.
void Pad(const Piece& p, std::string s, bool zero_ok, std::string* out) {
  if (p.upper) {
    for (char& ch : s) {
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 32);
    }
  }
  const int len = static_cast<int>(s.size());
  if (p.width <= len) {
    out->append(s);
  } else if (Has(p, '-')) {
    out->append(s);
    out->append(p.width - len, ' ');
  } else if (zero_ok && Has(p, '0')) {
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
    if (s.compare(sign, 2, "0x") == 0) sign += 2;
    s.insert(sign, static_cast<size_t>(p.width - len), '0');
    out->append(s);
  } else {
    out->append(p.width - len, ' ');
    out->append(s);
  }
}

// Groups the digits of the integer part of a formatted number by thousands.
std::string Group(std::string s) {
  size_t b = (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
  size_t e = b;
  while (e < s.size() && IsDigit(s[e])) ++e;
  for (size_t k = e; k > b + 3; k -= 3) s.insert(k - 3, 1, ',');
  return s;
}

// Appends the conversion `p` of `v`; false when `v` does not fit it.
bool Convert(const Piece& p, const Value& v, const TimeZone& tz, std::string* out) {
  char buf[1100];
  switch (p.conv) {
    case 's': {
      std::string s = ValueToString(v);
      if (p.precision >= 0 && static_cast<size_t>(p.precision) < s.size()) s.resize(p.precision);
      Pad(p, std::move(s), false, out);
      return true;
    }
    case 'b': {
      const std::string s = ValueToString(v);
      Pad(p, EqualsIgnoreCase(s, "false") ? "false" : "true", false, out);
      return true;
    }
    case 'c': {
      std::optional<int64_t> cp = IntegerOf(v);
      std::string s;
      if (cp && *cp >= 0 && *cp <= 0x10FFFF) {
        AppendUtf8(static_cast<uint32_t>(*cp), &s);
      } else {
        return false;
      }
      Pad(p, std::move(s), false, out);
      return true;
    }
    case 'd': {
      std::optional<int64_t> i = IntegerOf(v);
      if (!i) return false;
      std::string s = std::to_string(*i);
      if (*i >= 0 && Has(p, '+')) s.insert(0, "+");
      if (*i >= 0 && !Has(p, '+') && Has(p, ' ')) s.insert(0, " ");
      if (Has(p, ',')) s = Group(std::move(s));
      Pad(p, std::move(s), true, out);
      return true;
    }
    case 'x':
    case 'o': {
      std::optional<int64_t> i = IntegerOf(v);
      if (!i) return false;
      const uint64_t u = static_cast<uint64_t>(*i);  // two's complement for negatives, as Java
      std::snprintf(buf, sizeof(buf), p.conv == 'x' ? "%" PRIx64 : "%" PRIo64, u);
      std::string s = buf;
      if (Has(p, '#')) s.insert(0, p.conv == 'x' ? "0x" : "0");
      Pad(p, std::move(s), true, out);
      return true;
    }
    case 'f':
    case 'e':
    case 'g': {
      std::optional<double> d = ValueToNumber(v);
      if (!d) return false;
      std::string spec = "%";
      for (char fl : p.flags) {
        if (fl == '+' || fl == ' ' || fl == '#') spec.push_back(fl);
      }
      spec += "." + std::to_string(p.precision >= 0 ? p.precision : 6) + p.conv;
      std::snprintf(buf, sizeof(buf), spec.c_str(), *d);
      std::string s = buf;
      if (Has(p, ',') && p.conv == 'f') s = Group(std::move(s));
      Pad(p, std::move(s), true, out);
      return true;
    }
    case 't': {
      std::optional<double> d = ValueToNumber(v);
      if (!d || !FitsInt64(std::floor(*d))) return false;
      const std::string conv = std::string("%") + p.time_conv;
      Pad(p, FormatTime(conv, static_cast<int64_t>(std::floor(*d)), tz), false, out);
      return true;
    }
    default:
      return false;
  }
}

bool Build(Call& c, Stage* st) {
  std::vector<std::string> fields = c.Fields("field");
  std::vector<Piece> pieces;
  std::string problem = ParseFormat(c.String("format"), fields.size(), &pieces);
  if (!problem.empty()) {
    c.BadParam("format", "a printf-style format (" + problem + ")");
    return false;
  }
  std::optional<TimeZone> tz = TimeZone::Parse(c.String("timezone"));
  if (!tz) {
    c.BadParam("timezone", kTimezoneExpected);
    return false;
  }
  std::string as = c.String("as");
  std::vector<std::string> touched = fields;
  touched.push_back(as);
  SetRecordFunction(
      st,
      [pieces = std::move(pieces), fields = std::move(fields), as = std::move(as),
       tz = *tz](Record& r) {
        std::vector<std::optional<Value>> values(fields.size());
        for (size_t k = 0; k < fields.size(); ++k) values[k] = r.GetValue(fields[k]);
        std::string out;
        for (const Piece& p : pieces) {
          if (p.conv == 0) {
            out += p.literal;
          } else if (!values[p.arg] || !Convert(p, *values[p.arg], tz, &out)) {
            return true;  // a value is missing or does not fit: nothing is set
          }
        }
        r.Set(as, Value(std::move(out)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kFormat = {
    .name = "format",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "formats field values printf-style into a field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
