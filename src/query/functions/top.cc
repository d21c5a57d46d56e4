// top(field, limit=10, sum, percent=false, as): the most frequent combinations of the fields (or
// those with the largest sum of `sum`); rest=name adds a row counting the other groups. Collected
// by AggregateCollector (Grouping::kTop).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "limit", .type = Type::kLimit, .default_value = "10"},
    {.name = "sum", .type = Type::kField},
    {.name = "percent", .type = Type::kBool, .default_value = "false"},
    {.name = "as", .type = Type::kString},
    {.name = "rest", .type = Type::kString},
    {.name = "max", .type = Type::kUnsupported},
    {.name = "error", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kTop;
  st->fields = c.Fields("field");
  st->limit = c.Limit("limit");
  st->top_sum = c.String("sum");
  st->top_percent = c.Bool("percent");
  st->top_rest = c.String("rest");
  if (c.Given("rest") && st->top_rest.empty()) {
    c.BadParam("rest", "a non-empty value");
    return false;
  }
  Metric m = CountMetric(c.position());
  if (!st->top_sum.empty()) {
    m.kind = Metric::Kind::kSum;
    m.field = st->top_sum;
  }
  m.as = c.String("as");
  st->metrics = {std::move(m)};
  return true;
}

}  // namespace

const Function kTop = {
    .name = "top",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the most frequent values (or largest sums) of fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
