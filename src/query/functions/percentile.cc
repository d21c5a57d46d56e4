// percentile(field, percentiles=[50, 75, 99], as, accuracy): exact percentiles of a numeric
// field. An aggregate: a step of its own or a metric in function=.
#include "query/functions/list.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "percentiles", .type = Type::kPercentiles, .default_value = "[50, 75, 99]"},
    {.name = "as", .type = Type::kString},
    {.name = "accuracy", .type = Type::kRaw},
};

bool BuildMetric(Call& c, Metric* m) {
  m->kind = Metric::Kind::kPercentile;
  m->field = c.String("field");
  m->percentiles = c.Percentiles("percentiles");
  m->as = c.String("as");
  // accuracy tunes LogScale's estimator; percentiles here are exact. Only validated.
  if (const ArgValue* acc = c.Value("accuracy")) {
    std::optional<double> v;
    if (acc->kind == ArgValue::Kind::kScalar) v = ParseNumber(acc->text);
    if (!v || *v <= 0 || *v >= 1) {
      c.BadParam("accuracy", "a number between 0 and 1");
      return false;
    }
  }
  return true;
}

}  // namespace

const Function kPercentile = {
    .name = "percentile",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "exact percentiles of a numeric field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric,
};

}  // namespace sediment::query::functions
