// sum(field, as=_sum), avg(field, as=_avg), min(field, as=_min), max(field, as=_max),
// stdDev(field, as=_stddev) and range(field, as=_range) over the numeric values of a field.
// Aggregates: a step of their own or a metric in function=. stdDev and range keep the list of
// values (as percentile()), so they are exact.
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

const Function kSum = {
    .name = "sum",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the sum of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kSum>,
};
const Function kAvg = {
    .name = "avg",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the mean of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kAvg>,
};
const Function kMin = {
    .name = "min",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the smallest value of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kMin>,
};
const Function kMax = {
    .name = "max",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the largest value of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric<Metric::Kind::kMax>,
};

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
