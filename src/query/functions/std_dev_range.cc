// stdDev(field, as=_stddev) and range(field, as=_range) over the numeric values of a field.
// Aggregates: a step of their own or a metric in function=. Their state is the list of values
// (as percentile()'s), so they are exact.
//
// Choice where LogScale's documentation leaves room: stdDev is the population standard
// deviation (divided by n, not n - 1). range is max - min (an integer when both are).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kString},
};

template <Metric::Kind K>
bool BuildMetric(Call& c, Metric* m) {
  m->kind = K;
  m->field = c.String("field");
  m->as = c.String("as");
  return true;
}

}  // namespace

const Function kStdDev = {
    .name = "stdDev",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the standard deviation of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kStdDev>,
};
const Function kRange = {
    .name = "range",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the largest minus the smallest value of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kRange>,
};

}  // namespace sediment::query::functions
