// sort(field=_count, order=desc, limit=200, reverse, type=number): the first `limit` rows by
// the fields; order and type may be lists with one entry per field.
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
    {.name = "type", .type = Type::kRaw, .default_value = "number"},
};

// The items of `param` (a value or a list): one for every field, or one for all of them.
bool PerField(Call& c, std::string_view param, size_t nfields,
              std::vector<const ArgValue*>* items) {
  *items = ItemsOf(*c.Value(param));
  for (const ArgValue* item : *items) {
    if (item->kind != ArgValue::Kind::kScalar) {
      c.BadValue(param, *item, "a word or a list of words");
      return false;
    }
  }
  if (items->empty() || (items->size() != 1 && items->size() != nfields)) {
    c.BadParam(param,
               "one value, or a list with one value per field (" + std::to_string(nfields) + ")");
    return false;
  }
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
  const size_t n = st->fields.size();
  std::vector<Stage::SortKey> keys(n);
  if (c.Given("reverse")) {
    if (!c.ConvertBool("reverse", &st->descending)) return false;
    for (Stage::SortKey& k : keys) k.descending = st->descending;
  } else {
    std::vector<const ArgValue*> orders;
    if (!PerField(c, "order", n, &orders)) return false;
    for (size_t i = 0; i < n; ++i) {
      const ArgValue& item = *orders[orders.size() == 1 ? 0 : i];
      const std::string o = Lower(item.text);
      if (o == "asc" || o == "ascending") {
        keys[i].descending = false;
      } else if (o == "desc" || o == "descending") {
        keys[i].descending = true;
      } else {
        c.BadValue("order", item, "asc or desc");
        return false;
      }
    }
    st->descending = keys.empty() || keys[0].descending;
  }
  std::vector<const ArgValue*> types;
  if (!PerField(c, "type", n, &types)) return false;
  for (size_t i = 0; i < n; ++i) {
    const ArgValue& item = *types[types.size() == 1 ? 0 : i];
    const std::string t = Lower(item.text);
    if (t == "number" || t == "any") {
      keys[i].type = Stage::SortType::kNumber;
    } else if (t == "string") {
      keys[i].type = Stage::SortType::kString;
    } else if (t == "hex") {
      keys[i].type = Stage::SortType::kHex;
    } else {
      c.BadValue("type", item, "number, string, hex or any");
      return false;
    }
  }
  st->sort_keys = std::move(keys);
  return true;
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
