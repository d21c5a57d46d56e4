// split(field=_events, strip=false): one record per element of an array field. A per-record
// stage that may emit several records.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "_events"},
    {.name = "strip", .type = Type::kBool, .default_value = "false"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kSplit;
  st->field = c.String("field");
  st->strip = c.Bool("strip");
  return true;
}

}  // namespace

const Function kSplit = {
    .name = "split",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "one record per element of an array field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
