// The text:* family, registered with their namespaced names: text:length(string, as=_length),
// text:substring(string, begin=0, end, as=_substring), and the filters text:contains(string,
// substring), text:startsWith(string, substring), text:endsWith(string, substring).
// Per-record stages.
//
// `string` (and `substring`) is a field name, or a quoted text literal. Lengths and positions
// count UTF-8 code points, as length() does. Deviation: the three filters are steps of their own
// (they drop the records that do not match); they cannot be combined with AND/OR inside a filter.
// text:substring: `end` is exclusive; begin past the end gives "", a negative begin or end < begin
// is a 400 (constants) and sets nothing.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

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
    {.name = "begin", .type = Type::kLimit, .default_value = "0"},
    {.name = "end", .type = Type::kLimit},
    {.name = "as", .type = Type::kField, .default_value = "_substring"},
};

bool BuildSubstring(Call& c, Stage* st) {
  Operand s;
  if (!OperandOf(c, "string", &s)) return false;
  const int64_t begin = c.Limit("begin");
  std::optional<int64_t> end;
  if (c.Given("end")) {
    end = c.Limit("end");
    if (*end < begin) {
      c.BadParam("end", "an index not below begin");
      return false;
    }
  }
  std::string as = c.String("as");
  std::vector<std::string> touched = {as};
  if (!s.literal) touched.push_back(s.text);
  SetRecordFunction(
      st,
      [s, as, begin, end](Record& r) {
        std::optional<std::string> v = s.Read(r);
        if (!v) return true;
        const size_t b = CodePointOffset(*v, begin);
        const size_t e = end ? CodePointOffset(*v, *end) : v->size();
        r.Set(as, Value(v->substr(b, e - b)));
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
