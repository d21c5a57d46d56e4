// count(field, distinct=false, as=_count): the number of records (with `field`), or of distinct
// values of `field`. An aggregate: a step of its own or a metric in function=.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true},
    {.name = "distinct", .type = Type::kBool, .default_value = "false"},
    {.name = "as", .type = Type::kString},
};

bool BuildMetric(Call& c, Metric* m) {
  m->kind = Metric::Kind::kCount;
  m->field = c.String("field");
  m->distinct = c.Bool("distinct");
  m->as = c.String("as");
  if (m->distinct && m->field.empty()) {
    c.Error(c.position(), "missing required parameter 'field' for count() with distinct=true");
    return false;
  }
  return true;
}

}  // namespace

const Function kCount = {
    .name = "count",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the number of records, or of distinct values of a field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric,
};

}  // namespace sediment::query::functions
