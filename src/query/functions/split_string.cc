// splitString(field=@rawstring, by, index, as=_splitstring): a field split at the matches of a
// regular expression into the array as[0], as[1], ... (or only element `index` into `as`). A
// per-record stage.
//
// Choices where LogScale's documentation leaves room: as Java's String.split (LogScale runs on
// the JVM), trailing empty elements are dropped, and a match at the very start gives a leading
// empty element only when it is not empty itself. A negative index counts from the end (-1: the
// last). An index out of range sets nothing.
#include <re2/re2.h>

#include <memory>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "by", .type = Type::kString, .required = true},
    {.name = "index", .type = Type::kRaw},
    {.name = "as", .type = Type::kField, .default_value = "_splitstring"},
};

std::vector<std::string_view> Split(std::string_view s, const re2::RE2& re) {
  std::vector<std::string_view> out;
  size_t start = 0, at = 0;
  re2::StringPiece m;
  while (at <= s.size() &&
         re.Match(re2::StringPiece(s.data(), s.size()), at, s.size(), RE2::UNANCHORED, &m, 1)) {
    const size_t b = static_cast<size_t>(m.data() - s.data());
    const size_t e = b + m.size();
    if (m.empty()) {
      if (b >= s.size()) break;
      if (b == 0) {  // an empty match at the start splits nothing off
        at = 1;
        continue;
      }
    }
    out.push_back(s.substr(start, b - start));
    start = e;
    at = m.empty() ? e + 1 : e;
  }
  out.push_back(s.substr(start));
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

bool Build(Call& c, Stage* st) {
  std::string error;
  std::shared_ptr<const re2::RE2> re = CompileRegex(ConvertRegex(c.String("by"), false), &error);
  if (!re) {
    c.BadParam("by", "a regular expression (" + error + ")");
    return false;
  }
  std::optional<int64_t> index;
  if (const ArgValue* v = c.Value("index")) {
    index = v->kind == ArgValue::Kind::kScalar ? ParseInt(v->text) : std::nullopt;
    if (!index) {
      c.BadParam("index", "an integer");
      return false;
    }
  }
  std::string field = c.String("field");
  std::string as = c.String("as");
  // The array elements as[i] are new fields; any existing ones are replaced.
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [re, index, field = std::move(field), as = std::move(as)](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::string text(*v);  // Set may invalidate the view
        std::vector<std::string_view> parts = Split(text, ThreadLocalRegex(re));
        if (index) {
          const int64_t n = static_cast<int64_t>(parts.size());
          const int64_t k = *index < 0 ? n + *index : *index;
          if (k >= 0 && k < n) r.Set(as, Value(std::string(parts[k])));
          return true;
        }
        for (size_t k = 0; k < parts.size(); ++k) {
          r.Set(as + "[" + std::to_string(k) + "]", Value(std::string(parts[k])));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kSplitString = {
    .name = "splitString",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "splits a field at a regular expression into an array",
    .stage = &Build,
};

}  // namespace sediment::query::functions
