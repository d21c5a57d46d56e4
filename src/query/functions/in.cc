// in(field, values=[...], ignoreCase=false): the field equals one of the values (a value with '*'
// is an anchored wildcard). A filter: compiled to an OR of field matches.
#include "query/functions/list.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "values", .type = Type::kRaw, .required = true},
    {.name = "ignoreCase", .type = Type::kBool, .default_value = "false"},
};

FilterPtr Build(Call& c) {
  std::vector<const ArgValue*> items = ItemsOf(*c.Value("values"));
  if (items.empty()) {
    c.BadParam("values", "at least one value");
    return nullptr;
  }
  FilterPtr result;
  for (const ArgValue* item : items) {
    if (item->kind != ArgValue::Kind::kScalar) {
      c.BadValue("values", *item, "a string");
      return nullptr;
    }
    auto n = MakeFieldMatch(item->text, item->position);
    n->field = c.String("field");
    n->ignore_case = c.Bool("ignoreCase");
    result = result ? Combine(FilterNode::Kind::kOr, result, n, c.position()) : n;
  }
  return result;
}

}  // namespace

const Function kIn = {
    .name = "in",
    .kind = Kind::kFilter,
    .params = kParams,
    .doc = "keeps events whose field equals one of the values",
    .filter = &Build,
};

}  // namespace sediment::query::functions
