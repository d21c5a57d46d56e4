// table(fields, limit=200): the newest `limit` events (or first rows) with only those columns.
// Collected by KeptRowsCollector (aggregate.cc); with sortby (order=desc) it is a sort whose rows
// keep only the columns (SortCollector).
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
    {.name = "sortby", .type = Type::kFields},
    {.name = "order", .type = Type::kString, .default_value = "desc"},
    {.name = "reverse", .type = Type::kUnsupported},
    {.name = "type", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kTable;
  st->fields = c.Fields("fields");
  st->limit = c.Limit("limit");
  const std::string& order = c.String("order");
  bool descending = true;
  if (order == "asc" || order == "ascending") {
    descending = false;
  } else if (order != "desc" && order != "descending") {
    c.BadParam("order", "asc or desc");
    return false;
  }
  if (!c.Given("sortby")) {
    if (c.Given("order")) {
      c.BadParam("order", "given only with sortby");
      return false;
    }
    return true;
  }
  // table(sortby=...): a sort (numbers numerically, then text) whose rows keep only the columns.
  st->kind = Stage::Kind::kSort;
  st->table_columns = st->fields;
  st->fields = c.Fields("sortby");
  st->descending = descending;
  st->sort_keys.assign(st->fields.size(), Stage::SortKey{descending, Stage::SortType::kNumber});
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
