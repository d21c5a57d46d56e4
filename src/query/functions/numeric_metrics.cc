// sum(field, as=_sum), avg(field, as=_avg), min(field, as=_min), max(field, as=_max) over the
// numeric values of a field. Aggregates: a step of their own or a metric in function=.
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

}  // namespace sediment::query::functions
