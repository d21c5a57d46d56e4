// sankey(source, target, weight=count(as=_count)): the data of a Sankey diagram, one row per
// (source, target) edge with its weight. A groupBy([source, target], function=weight) shape,
// collected by AggregateCollector (Grouping::kGroupBy); the source and target fields keep their
// names. At most 20000 edges (groupBy's default limit), with a warning beyond.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "source", .type = Type::kField, .required = true},
    {.name = "target", .type = Type::kField, .required = true},
    {.name = "weight", .type = Type::kMetrics, .default_value = "count(as=_count)"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kGroupBy;
  st->fields = {c.String("source"), c.String("target")};
  if (st->fields[0] == st->fields[1]) {
    c.BadParam("target", "a field other than source");
    return false;
  }
  st->limit = 20000;
  return SetMetrics(c, "weight", st);
}

}  // namespace

const Function kSankey = {
    .name = "sankey",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the weighted (source, target) edges of a Sankey diagram",
    .stage = &Build,
};

}  // namespace sediment::query::functions
