// groupBy(field, function=count(), limit=20000): the metrics per distinct combination of the
// fields. Collected by AggregateCollector (aggregate.cc, Grouping::kGroupBy).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "limit",
     .type = Type::kLimit,
     .default_value = "20000",
     .max = kMaxGroups,
     .max_alias = true},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kGroupBy;
  st->fields = c.Fields("field");
  st->limit = c.Limit("limit");
  return SetMetrics(c, "function", st);
}

}  // namespace

const Function kGroupBy = {
    .name = "groupBy",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the metrics per distinct combination of fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
