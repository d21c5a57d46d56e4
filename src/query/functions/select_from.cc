// selectFromMax(field, include), selectFromMin(field, include) and selectLast(fields):
// aggregates that keep fields of one record (the one with the largest / smallest numeric value
// of `field`) or, for selectLast, each field's value in the newest record that has it. A step of
// their own or a metric in function=.
//
// Choice where LogScale's documentation leaves room: among records with the same value (or the
// same time), selectFromMax and selectLast keep the last in record order ((@timestamp,
// partition, offset, index) for events), selectFromMin the first, so the answer does not depend
// on how the data was split. Records without a numeric `field` are not candidates.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kFromParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "include", .type = Type::kFields, .required = true},
};

template <Metric::Kind K>
bool BuildFrom(Call& c, Metric* m) {
  m->kind = K;
  m->field = c.String("field");
  m->select_fields = c.Fields("include");
  return true;
}

constexpr Param kLastParams[] = {
    {.name = "fields", .type = Type::kFields, .unnamed = true, .required = true},
};

bool BuildLast(Call& c, Metric* m) {
  m->kind = Metric::Kind::kSelectLast;
  m->select_fields = c.Fields("fields");
  return true;
}

}  // namespace

const Function kSelectFromMax = {
    .name = "selectFromMax",
    .kind = Kind::kAggregate,
    .params = kFromParams,
    .doc = "fields of the record with the largest value of a field",
    .stage = &MetricAsStage,
    .metric = &BuildFrom<Metric::Kind::kSelectMax>,
};
const Function kSelectFromMin = {
    .name = "selectFromMin",
    .kind = Kind::kAggregate,
    .params = kFromParams,
    .doc = "fields of the record with the smallest value of a field",
    .stage = &MetricAsStage,
    .metric = &BuildFrom<Metric::Kind::kSelectMin>,
};
const Function kSelectLast = {
    .name = "selectLast",
    .kind = Kind::kAggregate,
    .params = kLastParams,
    .doc = "each field's value in the newest record that has it",
    .stage = &MetricAsStage,
    .metric = &BuildLast,
};

}  // namespace sediment::query::functions
