// parseFixedWidth(field=@rawstring, columns, widths, trim=true): a text of fixed-width columns
// split into fields. A per-record stage.
//
// Column i takes the next widths[i] characters (UTF-8 code points) of the text; a column that
// starts at or past the end of the text is not set, one cut short by the end gets what is left
// (LogScale's example: `117success  27% 3.14` with widths [3, 9, 4, 10, 10] sets count=117,
// status=success, completion=27%, precision=3.14 and no sourcetask). With trim=true (the default)
// spaces and tabs around each value are dropped. Characters beyond the last column are ignored.
// `columns` and `widths` must have the same number of items; widths are positive integers. A
// missing field sets nothing.
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "columns", .type = Type::kFields, .required = true},
    {.name = "widths", .type = Type::kRaw, .required = true},
    {.name = "trim", .type = Type::kBool, .default_value = "true"},
};

constexpr size_t kMaxWidth = 1 << 20;

// The byte offset `n` code points after `from` in `s`, or s.size().
size_t Advance(std::string_view s, size_t from, size_t n) {
  size_t i = from;
  while (i < s.size() && n > 0) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    --n;
  }
  return i;
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool Build(Call& c, Stage* st) {
  std::vector<std::string> columns = c.Fields("columns");
  std::vector<size_t> widths;
  for (const ArgValue* v : ItemsOf(*c.Value("widths"))) {
    std::optional<int64_t> w;
    if (v->kind == ArgValue::Kind::kScalar) w = ParseInt(v->text);
    if (!w || *w < 1 || *w > static_cast<int64_t>(kMaxWidth)) {
      c.BadValue("widths", *v, "a positive integer (characters) or a list of them");
      return false;
    }
    widths.push_back(static_cast<size_t>(*w));
  }
  if (widths.size() != columns.size()) {
    c.BadParam("widths", "as many widths as columns (" + std::to_string(columns.size()) + ")");
    return false;
  }
  std::string field = c.String("field");
  const bool trim = c.Bool("trim");
  std::vector<std::string> touched = columns;
  touched.push_back(field);
  SetRecordFunction(
      st,
      [field, columns, widths, trim](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        const std::string text(*v);  // columns may overwrite `field`
        size_t pos = 0;
        for (size_t i = 0; i < columns.size() && pos < text.size(); ++i) {
          const size_t end = Advance(text, pos, widths[i]);
          std::string_view value = std::string_view(text).substr(pos, end - pos);
          r.Set(columns[i], Value(std::string(trim ? TrimBlanks(value) : value)));
          pos = end;
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kParseFixedWidth = {
    .name = "parseFixedWidth",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a text of fixed-width columns split into fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
