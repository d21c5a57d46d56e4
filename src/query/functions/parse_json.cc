// parseJson(field=@rawstring, prefix=""): a JSON object's members become fields (flattened with
// '.', arrays as name[i]). A per-record stage.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "prefix", .type = Type::kString, .default_value = "\"\""},
    {.name = "exclude", .type = Type::kUnsupported},
    {.name = "include", .type = Type::kUnsupported},
    {.name = "excludeEmpty", .type = Type::kUnsupported},
    {.name = "handleNull", .type = Type::kUnsupported},
    {.name = "removePrefixes", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kParseJson;
  st->field = c.String("field");
  st->prefix = c.String("prefix");
  return true;
}

}  // namespace

const Function kParseJson = {
    .name = "parseJson",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts the members of a JSON object as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
