// The text:* family, registered with their namespaced names: text:length(string, as=_length),
// text:substring(string, begin=0, end, as=_substring), text:positionOf(string, character,
// occurrence=1, as=_position), and the filters text:contains(string, substring),
// text:startsWith(string, substring), text:endsWith(string, substring).
// Per-record stages.
//
// `string` (and `substring`) is a field name, or a quoted text literal. Lengths and positions
// count UTF-8 code points, as length() does. Deviation: the three filters are steps of their own
// (they drop the records that do not match); they cannot be combined with AND/OR inside a filter.
// text:substring: `end` is exclusive; begin past the end gives "", a negative begin or end < begin
// is a 400 (constants) and sets nothing. begin and end are expressions
// (`end=text:length(m) - 9`): per record, a value that is no non-negative integer sets nothing.
// text:positionOf: the zero-based index (in code points) of the occurrence-th `character` (a
// text of any length); no output field when it occurs fewer times.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

// A field name or a quoted literal.
struct Operand {
  bool literal = false;
  std::string text;
  std::optional<std::string> Read(const Record& r) const {
    if (literal) return text;
    std::string scratch;
    std::optional<std::string_view> v = r.Get(text, &scratch);
    if (!v) return std::nullopt;
    return std::string(*v);
  }
};

bool OperandOf(Call& c, std::string_view param, Operand* out) {
  const ArgValue* v = c.Value(param);
  if (v == nullptr || v->kind != ArgValue::Kind::kScalar || (!v->quoted && v->text.empty())) {
    c.BadParam(param, "a field name or a quoted string");
    return false;
  }
  out->literal = v->quoted;
  out->text = v->text;
  return true;
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += IsContinuation(static_cast<unsigned char>(c)) ? 0 : 1;
  return n;
}

size_t CodePointOffset(std::string_view s, int64_t cp) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsContinuation(static_cast<unsigned char>(s[i]))) {
      if (cp == 0) return i;
      --cp;
    }
  }
  return s.size();
}

constexpr Param kLengthParams[] = {
    {.name = "string", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_length"},
};

bool BuildLength(Call& c, Stage* st) {
  Operand s;
  if (!OperandOf(c, "string", &s)) return false;
  std::string as = c.String("as");
  std::vector<std::string> touched = {as};
  if (!s.literal) touched.push_back(s.text);
  SetRecordFunction(
      st,
      [s, as](Record& r) {
        if (std::optional<std::string> v = s.Read(r)) r.Set(as, Value(CodePoints(*v)));
        return true;
      },
      std::move(touched));
  return true;
}

constexpr Param kSubstringParams[] = {
    {.name = "string", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "begin", .type = Type::kExpr, .default_value = "0"},
    {.name = "end", .type = Type::kExpr},
    {.name = "as", .type = Type::kField, .default_value = "_substring"},
};

// An index given as an expression: a constant is checked once (a negative one is a 400); any
// other expression is evaluated per record, and a value that is no non-negative integer sets
// nothing for that record.
struct Index {
  ExprPtr expr;                     // null: not given
  std::optional<int64_t> constant;  // the value when `expr` is a numeric literal

  std::optional<int64_t> Eval(const Record& r) const {
    if (constant) return constant;
    std::optional<Value> v = Evaluate(*expr, r);
    if (!v) return std::nullopt;
    std::optional<int64_t> n = IntegerOf(*v);
    if (n && *n < 0) return std::nullopt;
    return n;
  }
};

bool IndexOf(Call& c, std::string_view param, Index* out, std::vector<std::string>* fields,
             bool* reads_all) {
  out->expr = c.Expression(param);
  if (!out->expr) return true;
  const Expr& e = *out->expr;
  const bool negated_number = e.kind == Expr::Kind::kUnary && e.text == "-" && e.args.size() == 1 &&
                              e.args[0]->kind == Expr::Kind::kNumber;
  if (e.kind == Expr::Kind::kNumber || negated_number) {
    const double d = negated_number ? -e.args[0]->number : e.number;
    if (!FitsInt64(d) || d < 0) {
      c.BadParam(param, "a non-negative integer or an expression");
      return false;
    }
    out->constant = static_cast<int64_t>(d);
    return true;
  }
  if (!ExpressionFields(*out->expr, fields)) *reads_all = true;
  return true;
}

bool BuildSubstring(Call& c, Stage* st) {
  Operand s;
  if (!OperandOf(c, "string", &s)) return false;
  std::vector<std::string> touched;
  bool reads_all = false;
  Index begin, end;
  if (!IndexOf(c, "begin", &begin, &touched, &reads_all) ||
      !IndexOf(c, "end", &end, &touched, &reads_all)) {
    return false;
  }
  if (begin.constant && end.constant && *end.constant < *begin.constant) {
    c.BadParam("end", "an index not below begin");
    return false;
  }
  std::string as = c.String("as");
  touched.push_back(as);
  if (!s.literal) touched.push_back(s.text);
  SetRecordFunction(
      st,
      [s, as, begin, end](Record& r) {
        std::optional<std::string> v = s.Read(r);
        if (!v) return true;
        std::optional<int64_t> b = begin.expr ? begin.Eval(r) : std::optional<int64_t>(0);
        std::optional<int64_t> e;
        if (end.expr) {
          e = end.Eval(r);
          if (!e) return true;
        }
        if (!b || (e && *e < *b)) return true;
        const size_t from = CodePointOffset(*v, *b);
        const size_t to = e ? CodePointOffset(*v, *e) : v->size();
        r.Set(as, Value(v->substr(from, to - from)));
        return true;
      },
      std::move(touched), reads_all);
  return true;
}

constexpr Param kPositionOfParams[] = {
    {.name = "string", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "character", .type = Type::kString, .required = true},
    {.name = "occurrence", .type = Type::kLimit, .default_value = "1"},
    {.name = "as", .type = Type::kField, .default_value = "_position"},
};

bool BuildPositionOf(Call& c, Stage* st) {
  Operand s;
  if (!OperandOf(c, "string", &s)) return false;
  const std::string needle = c.String("character");
  if (needle.empty()) {
    c.BadParam("character", "a non-empty text");
    return false;
  }
  const int64_t occurrence = c.Limit("occurrence");
  if (occurrence < 1) {
    c.BadParam("occurrence", "a positive integer");
    return false;
  }
  std::string as = c.String("as");
  std::vector<std::string> touched = {as};
  if (!s.literal) touched.push_back(s.text);
  SetRecordFunction(
      st,
      [s, needle, occurrence, as](Record& r) {
        std::optional<std::string> v = s.Read(r);
        if (!v) return true;
        size_t at = std::string::npos;
        for (int64_t n = 0, from = 0; n < occurrence; ++n) {
          at = v->find(needle, static_cast<size_t>(from));
          if (at == std::string::npos) return true;  // fewer occurrences: no output field
          from = static_cast<int64_t>(at + 1);
        }
        r.Set(as, Value(CodePoints(std::string_view(*v).substr(0, at))));
        return true;
      },
      std::move(touched));
  return true;
}

constexpr Param kMatchParams[] = {
    {.name = "string", .type = Type::kRaw, .required = true},
    {.name = "substring", .type = Type::kRaw, .required = true},
};

enum class Match { kContains, kStartsWith, kEndsWith };

template <Match M>
bool BuildMatch(Call& c, Stage* st) {
  Operand s, sub;
  if (!OperandOf(c, "string", &s) || !OperandOf(c, "substring", &sub)) return false;
  std::vector<std::string> touched;
  if (!s.literal) touched.push_back(s.text);
  if (!sub.literal) touched.push_back(sub.text);
  SetRecordFunction(
      st,
      [s, sub](Record& r) {
        std::optional<std::string> v = s.Read(r), w = sub.Read(r);
        if (!v || !w) return false;
        if constexpr (M == Match::kContains) return v->find(*w) != std::string::npos;
        if constexpr (M == Match::kStartsWith) return v->starts_with(*w);
        return v->ends_with(*w);
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kTextLength = {
    .name = "text:length",
    .kind = Kind::kTransform,
    .params = kLengthParams,
    .doc = "the number of characters of a text",
    .stage = &BuildLength,
};
const Function kTextSubstring = {
    .name = "text:substring",
    .kind = Kind::kTransform,
    .params = kSubstringParams,
    .doc = "part of a text",
    .stage = &BuildSubstring,
};
const Function kTextPositionOf = {
    .name = "text:positionOf",
    .kind = Kind::kTransform,
    .params = kPositionOfParams,
    .doc = "the index of a text's n-th occurrence of a substring",
    .stage = &BuildPositionOf,
};
const Function kTextContains = {
    .name = "text:contains",
    .kind = Kind::kTransform,
    .params = kMatchParams,
    .doc = "keeps the records whose text contains a substring",
    .stage = &BuildMatch<Match::kContains>,
    .negatable = true,
};
const Function kTextStartsWith = {
    .name = "text:startsWith",
    .kind = Kind::kTransform,
    .params = kMatchParams,
    .doc = "keeps the records whose text starts with a substring",
    .stage = &BuildMatch<Match::kStartsWith>,
    .negatable = true,
};
const Function kTextEndsWith = {
    .name = "text:endsWith",
    .kind = Kind::kTransform,
    .params = kMatchParams,
    .doc = "keeps the records whose text ends with a substring",
    .stage = &BuildMatch<Match::kEndsWith>,
    .negatable = true,
};

}  // namespace sediment::query::functions
