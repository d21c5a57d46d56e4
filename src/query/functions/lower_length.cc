// lower(field, as=_lower): the field lower-cased; length(field, as=_length): its number of
// characters. Per-record stages.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kLowerParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_lower"},
    {.name = "locale", .type = Type::kUnsupported},
    {.name = "type", .type = Type::kUnsupported},
};
constexpr Param kLengthParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_length"},
};

template <Stage::Kind K>
bool Build(Call& c, Stage* st) {
  st->kind = K;
  st->field = c.String("field");
  st->as = c.String("as");
  return true;
}

}  // namespace

const Function kLower = {
    .name = "lower",
    .kind = Kind::kTransform,
    .params = kLowerParams,
    .doc = "a field lower-cased",
    .stage = &Build<Stage::Kind::kLower>,
};
const Function kLength = {
    .name = "length",
    .kind = Kind::kTransform,
    .params = kLengthParams,
    .doc = "the number of characters of a field",
    .stage = &Build<Stage::Kind::kLength>,
};

}  // namespace sediment::query::functions
