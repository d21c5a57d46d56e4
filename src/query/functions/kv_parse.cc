// kvParse(field=@rawstring, override=false): key=value pairs become fields. A per-record stage.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .default_value = "@rawstring"},
    {.name = "override", .type = Type::kBool, .default_value = "false"},
    {.name = "as", .type = Type::kUnsupported},
    {.name = "prefix", .type = Type::kUnsupported},
    {.name = "excludeEmpty", .type = Type::kUnsupported},
    {.name = "separator", .type = Type::kUnsupported},
    {.name = "separatorPadding", .type = Type::kUnsupported},
    {.name = "onDuplicate", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kKvParse;
  st->override_fields = c.Bool("override");
  const std::vector<std::string>& fields = c.Fields("field");
  if (fields.size() > 1) {
    c.BadParam("field", "one field");
    return false;
  }
  st->field = fields[0];
  return true;
}

}  // namespace

const Function kKvParse = {
    .name = "kvParse",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts key=value pairs as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
