// table(fields, limit=200): the newest `limit` events (or first rows) with only those columns.
// Collected by KeptRowsCollector (aggregate.cc).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "fields", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "limit",
     .type = Type::kLimit,
     .default_value = "200",
     .max = kMaxRows,
     .max_alias = true},
    {.name = "sortby", .type = Type::kUnsupported},
    {.name = "order", .type = Type::kUnsupported},
    {.name = "reverse", .type = Type::kUnsupported},
    {.name = "type", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kTable;
  st->fields = c.Fields("fields");
  st->limit = c.Limit("limit");
  return true;
}

}  // namespace

const Function kTable = {
    .name = "table",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the newest events (or first rows) with the given columns",
    .stage = &Build,
};

}  // namespace sediment::query::functions
