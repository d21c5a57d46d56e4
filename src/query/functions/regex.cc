// regex(regex, field=@rawstring, strict=true, flags=m, limit, repeat=false): named groups of the
// first match become fields; strict drops records without a match. A per-record stage.
#include "query/functions/list.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "regex", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kField, .default_value = "@rawstring"},
    {.name = "strict", .type = Type::kBool, .default_value = "true"},
    {.name = "flags", .type = Type::kString, .default_value = "m"},
    {.name = "limit", .type = Type::kLimit, .default_value = "100"},
    {.name = "repeat", .type = Type::kBool, .default_value = "false"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kRegex;
  st->field = c.String("field");
  st->strict = c.Bool("strict");
  if (c.Bool("repeat")) {
    c.BadParam("repeat", "false (repeat=true is not supported)");
    return false;
  }
  std::string prefix;
  for (char f : c.String("flags")) {
    if (f == 'F') continue;  // LogScale's engine choice; no meaning here
    std::string flag = RegexFlag(f);
    if (flag.empty()) {
      c.BadParam("flags", "a combination of the flags d, i and m");
      return false;
    }
    prefix += flag;
  }
  std::string error;
  auto re = CompileRegex(prefix + ConvertRegex(c.String("regex"), /*plain_to_noncapturing=*/true),
                         &error);
  if (!re) {
    c.Error(c.Value("regex")->position, "invalid regular expression in regex(): " + error);
    return false;
  }
  SetStageRegex(std::move(re), st);
  return true;
}

}  // namespace

const Function kRegex = {
    .name = "regex",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts the named groups of a regular expression as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
