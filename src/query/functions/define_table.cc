// defineTable(name, query={...}, include=[...], start, end) and join(query={...}, field, key,
// include, mode=inner, start, end, limit, max=1): tables made by a subquery (TableQuery,
// compiled.h). The subquery runs first, on the coordinator (coordinator/README.md), and its rows
// are bound into the query as a table before it runs everywhere: match(table=) reads a
// defineTable() table, join() is a match() against its own.
#include <algorithm>

#include "query/functions/list.h"
#include "query/lookup.h"

namespace sediment::query::functions {
namespace {

constexpr Param kDefineTableParams[] = {
    {.name = "query", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "name", .type = Type::kString, .required = true},
    {.name = "include", .type = Type::kRaw, .required = true},
    {.name = "start", .type = Type::kString},
    {.name = "end", .type = Type::kString},
    {.name = "view", .type = Type::kUnsupported},
};

constexpr Param kJoinParams[] = {
    {.name = "query", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "key", .type = Type::kField},
    {.name = "include", .type = Type::kRaw},
    {.name = "mode", .type = Type::kString, .default_value = "inner"},
    {.name = "start", .type = Type::kString},
    {.name = "end", .type = Type::kString},
    {.name = "limit",
     .type = Type::kLimit,
     .default_value = "100000",
     .max = kMaxRows,
     .max_alias = true},
    {.name = "max", .type = Type::kString, .default_value = "1"},
    {.name = "repo", .type = Type::kUnsupported},
    {.name = "view", .type = Type::kUnsupported},
    {.name = "live", .type = Type::kUnsupported},
};

// The TableQuery of `c`'s query= subquery (with start=/end=); null (error recorded) when query=
// is not a subquery.
std::shared_ptr<TableQuery> TableOf(Call& c) {
  const ArgValue* q = c.Value("query");
  if (q->kind != ArgValue::Kind::kSubquery || q->text.size() < 2) {
    c.BadValue("query", *q, "a subquery { ... }");
    return nullptr;
  }
  auto t = std::make_shared<TableQuery>();
  t->function = c.name();
  t->query = q->text.substr(1, q->text.size() - 2);
  t->start = c.String("start");
  t->end = c.String("end");
  t->position = c.position();
  return t;
}

// The column names of `param` (a name or a list; `*` = every field); false (error recorded) on
// anything else.
bool Columns(Call& c, std::string_view param, std::vector<std::string>* out, bool* all) {
  const ArgValue* v = c.Value(param);
  if (v == nullptr) return true;
  for (const ArgValue* item : ItemsOf(*v)) {
    if (item->kind != ArgValue::Kind::kScalar || item->text.empty()) {
      c.BadValue(param, *item, "a field name or a list of field names");
      return false;
    }
    if (item->text == "*") {
      *all = true;
    } else if (std::find(out->begin(), out->end(), item->text) == out->end()) {
      out->push_back(item->text);
    }
  }
  return true;
}

bool BuildDefineTable(Call& c, Stage* st) {
  std::shared_ptr<TableQuery> t = TableOf(c);
  if (t == nullptr) return false;
  t->name = c.String("name");
  if (t->name.empty()) {
    c.BadParam("name", "a table name");
    return false;
  }
  if (!Columns(c, "include", &t->include, &t->include_all)) return false;
  if (t->include_all) t->include.clear();
  t->limit = kMaxRows;
  st->kind = Stage::Kind::kFilter;
  st->filter = std::make_shared<FilterNode>();  // kTrue: the step itself does nothing
  st->table_query = std::move(t);
  return true;
}

bool BuildJoin(Call& c, Stage* st) {
  std::shared_ptr<TableQuery> t = TableOf(c);
  if (t == nullptr) return false;
  const std::string& mode = c.String("mode");
  if (mode != "inner" && mode != "left") {
    c.BadParam("mode", "inner or left");
    return false;
  }
  if (c.String("max") != "1") {
    c.BadParam("max", "1 (one row of the subquery per key)");
    return false;
  }
  const std::string key = c.Given("key") ? c.String("key") : c.String("field");
  std::vector<std::string> include;
  bool all = false;
  if (!Columns(c, "include", &include, &all)) return false;
  if (all) {
    c.BadParam("include", "a list of field names (not *)");
    return false;
  }
  t->name = "join@" + std::to_string(c.position());
  t->include = {key};
  for (const std::string& f : include) {
    if (f != key) t->include.push_back(f);
  }
  t->limit = c.Limit("limit");
  st->kind = Stage::Kind::kMatch;
  st->field = c.String("field");
  st->strict = mode == "inner";
  st->table = t->name;
  if (const BoundTables* tables = CurrentBoundTables()) {
    auto it = tables->find(t->name);
    if (it == tables->end()) {
      c.Error(c.position(), "join(): its subquery's result is not bound");
      return false;
    }
    auto built = BuildMatchTable(it->second, key, include, /*include_all=*/false, false);
    if (!built.ok()) {
      c.Error(c.position(), "join(): " + built.status().message());
      return false;
    }
    st->match_table = std::move(*built);
  }
  st->table_query = std::move(t);
  return true;
}

}  // namespace

const Function kDefineTable = {
    .name = "defineTable",
    .kind = Kind::kTransform,
    .params = kDefineTableParams,
    .doc = "a table of the subquery's result rows, for match(table=...) later in the query",
    .stage = &BuildDefineTable,
};

const Function kJoin = {
    .name = "join",
    .kind = Kind::kTransform,
    .params = kJoinParams,
    .doc = "events whose field equals the key of a row of the subquery's result, enriched with it",
    .stage = &BuildJoin,
};

}  // namespace sediment::query::functions
