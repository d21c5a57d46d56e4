// upper(field, as=_upper): a field's text upper-cased into a field (the step form of the
// upper() expression function; the mapping of lower()). A per-record stage.
#include <string>

#include "query/functions/field_mapper.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_upper"},
    {.name = "locale", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  return SetFieldMapper(c, st, [](std::string_view v) { return MapCaseText(v, true); });
}

}  // namespace

const Function kUpper = {
    .name = "upper",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "upper-cases a field into a field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
