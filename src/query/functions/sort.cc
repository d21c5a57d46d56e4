// sort(field=_count, order=desc, limit=200, reverse): the first `limit` rows by the fields.
// Collected by SortCollector (aggregate.cc).
#include "query/functions/list.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .default_value = "_count"},
    {.name = "order", .type = Type::kRaw, .default_value = "desc"},
    {.name = "limit",
     .type = Type::kLimit,
     .default_value = "200",
     .max = kMaxRows,
     .max_alias = true},
    {.name = "reverse", .type = Type::kRaw},
    {.name = "type", .type = Type::kUnsupported},
};

// order=asc|desc, or a list of them that all agree.
bool GetOrder(Call& c, bool* descending) {
  std::optional<bool> result;
  for (const ArgValue* item : ItemsOf(*c.Value("order"))) {
    std::string o = Lower(item->text);
    std::optional<bool> desc;
    if (item->kind == ArgValue::Kind::kScalar && (o == "asc" || o == "ascending")) desc = false;
    if (item->kind == ArgValue::Kind::kScalar && (o == "desc" || o == "descending")) desc = true;
    if (!desc || (result && *result != *desc)) {
      c.BadValue("order", *item, "asc or desc (one order for all fields)");
      return false;
    }
    result = desc;
  }
  if (!result) {
    c.BadParam("order", "asc or desc");
    return false;
  }
  *descending = *result;
  return true;
}

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kSort;
  st->fields = c.Fields("field");
  st->limit = c.Limit("limit");
  if (c.Given("order") && c.Given("reverse")) {
    c.Error(c.GivenArg("reverse")->position, "sort() takes order or reverse, not both");
    return false;
  }
  if (c.Given("reverse")) return c.ConvertBool("reverse", &st->descending);
  return GetOrder(c, &st->descending);
}

}  // namespace

const Function kSort = {
    .name = "sort",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the first rows ordered by fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
