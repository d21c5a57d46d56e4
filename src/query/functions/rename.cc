// rename(field, as) / rename(field=[[from, to], ...]): renames fields. A per-record stage
// (transform.cc applies it).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kRaw},
};

// rename(field=[[from, to], ...]).
bool BuildPairs(Call& c, Stage* st) {
  if (c.Given("as")) {
    c.Error(c.GivenArg("as")->position, "rename() takes as only with a single field");
    return false;
  }
  for (const ArgValue& pair : c.Value("field")->list) {
    if (pair.kind != ArgValue::Kind::kList || pair.list.size() != 2 ||
        pair.list[0].kind != ArgValue::Kind::kScalar ||
        pair.list[1].kind != ArgValue::Kind::kScalar || pair.list[0].text.empty() ||
        pair.list[1].text.empty()) {
      c.BadValue("field", pair, "a [from, to] pair");
      return false;
    }
    st->renames.emplace_back(pair.list[0].text, pair.list[1].text);
  }
  return true;
}

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kRename;
  const ArgValue& v = *c.Value("field");
  if (v.kind == ArgValue::Kind::kList && !v.list.empty() &&
      v.list[0].kind == ArgValue::Kind::kList) {
    return BuildPairs(c, st);
  }
  std::vector<std::string> from;
  if (!c.ConvertFields("field", &from)) return false;
  if (from.size() != 1) {
    c.BadParam("field", "a field name or a list of [from, to] pairs");
    return false;
  }
  if (!c.Given("as")) {
    c.Error(c.position(), "missing required parameter 'as' for rename()");
    return false;
  }
  std::string to;
  if (!c.ConvertField("as", &to)) return false;
  st->renames.emplace_back(from[0], to);
  return true;
}

}  // namespace

const Function kRename = {
    .name = "rename",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "renames a field, or several [from, to] pairs",
    .stage = &Build,
};

}  // namespace sediment::query::functions
