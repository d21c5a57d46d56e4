// callFunction(function, field, as=_function): the aggregate named by `function` (avg, count,
// max, min, range or sum) over `field`, so that a dashboard parameter can choose it
// (`timeChart(function=callFunction(?{fn=avg}, field=ms))`). An aggregate: a step of its own or
// a metric in function=. count counts the records having `field`, as count(field) does.
#include <array>
#include <string_view>
#include <utility>

#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "function", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kString, .default_value = "_function"},
};

constexpr std::array<std::pair<std::string_view, Metric::Kind>, 6> kCallable = {{
    {"avg", Metric::Kind::kAvg},
    {"count", Metric::Kind::kCount},
    {"max", Metric::Kind::kMax},
    {"min", Metric::Kind::kMin},
    {"range", Metric::Kind::kRange},
    {"sum", Metric::Kind::kSum},
}};

bool BuildMetric(Call& c, Metric* m) {
  const std::string name = c.String("function");
  for (const auto& [callable, kind] : kCallable) {
    if (name == callable) {
      m->kind = kind;
      m->field = c.String("field");
      m->as = c.String("as");
      return true;
    }
  }
  c.BadParam("function", "one of avg, count, max, min, range, sum");
  return false;
}

}  // namespace

const Function kCallFunction = {
    .name = "callFunction",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the aggregate named by a parameter (avg, count, max, min, range, sum) over a field",
    .stage = &MetricAsStage,
    .metric = &BuildMetric,
};

}  // namespace sediment::query::functions
