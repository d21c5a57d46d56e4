// match(file, field, column=field, include=all other columns, strict=true, mode=string,
// ignoreCase=false): enriches (and with strict, filters) events with the rows of a lookup file
// whose `column` equals the event's `field` (mode=glob: whose glob pattern matches it; mode=cidr:
// whose subnet holds its address; MatchMode in lookup.h). The file is read and indexed while the
// query compiles, through the LookupFiles the caller of Compile gives (query/lookup.h); a
// per-record stage.
#include "query/functions/list.h"
#include "query/lookup.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kMatchParams[] = {
    {.name = "file", .type = Type::kString, .unnamed = true},
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "column", .type = Type::kField},
    {.name = "include", .type = Type::kRaw},
    {.name = "strict", .type = Type::kBool, .default_value = "true"},
    {.name = "mode", .type = Type::kString, .default_value = "string"},
    {.name = "ignoreCase", .type = Type::kBool, .default_value = "false"},
    {.name = "table", .type = Type::kString},
    {.name = "glob", .type = Type::kUnsupported},
    {.name = "nrows", .type = Type::kUnsupported},
    {.name = "cidr", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kMatch;
  st->field = c.String("field");
  st->strict = c.Bool("strict");
  const std::string& file = c.String("file");
  const std::string column = c.Given("column") ? c.String("column") : st->field;
  MatchMode mode = MatchMode::kString;
  const std::string mode_name = Lower(c.String("mode"));
  if (mode_name == "glob") {
    mode = MatchMode::kGlob;
  } else if (mode_name == "cidr") {
    mode = MatchMode::kCidr;
  } else if (mode_name != "string") {
    c.BadParam("mode", "string, glob or cidr");
    return false;
  }
  if (mode == MatchMode::kCidr && c.Bool("ignoreCase")) {
    c.BadParam("ignoreCase", "false with mode=cidr (addresses have no case)");
    return false;
  }
  if (c.Given("file") == c.Given("table")) {
    c.Error(c.position(), c.Given("file") ? "match(): give file= or table=, not both"
                                          : "match(): missing required parameter 'file' (or "
                                            "'table')");
    return false;
  }
  std::vector<std::string> include;
  const bool include_all = !c.Given("include");
  if (!include_all) {
    for (const ArgValue* item : ItemsOf(*c.Value("include"))) {
      if (item->kind != ArgValue::Kind::kScalar || item->text.empty()) {
        c.BadValue("include", *item, "a column name or a list of column names");
        return false;
      }
      include.push_back(item->text);
    }
  }
  if (c.Given("table")) {
    // A table of defineTable(): bound by the coordinator before the query runs (the parser
    // checks that the query defines it).
    st->table = c.String("table");
    const BoundTables* tables = CurrentBoundTables();
    if (tables == nullptr) return true;
    const size_t tat = c.Value("table")->position;
    auto it = tables->find(st->table);
    if (it == tables->end()) {
      c.Error(tat, "match(): no table '" + st->table + "'");
      return false;
    }
    auto built = BuildMatchTable(it->second, column, std::move(include), include_all,
                                 c.Bool("ignoreCase"), mode);
    if (!built.ok()) {
      c.Error(tat, "match(): table '" + st->table + "': " + built.status().message());
      return false;
    }
    st->match_table = std::move(*built);
    return true;
  }
  const size_t at = c.Value("file") ? c.Value("file")->position : c.position();
  const LookupFiles* files = CurrentLookupFiles();
  if (files == nullptr) {
    c.Error(at, "match(): no lookup files here (upload them to the repository)");
    return false;
  }
  Result<std::string> content = files->Read(file);
  if (!content.ok()) {
    c.Error(at, "match(): " + content.status().message());
    return false;
  }
  Result<LookupTable> table = ParseLookupTable(file, *content);
  if (!table.ok()) {
    c.Error(at, "match(): file '" + file + "': " + table.status().message());
    return false;
  }
  auto built =
      BuildMatchTable(*table, column, std::move(include), include_all, c.Bool("ignoreCase"), mode);
  if (!built.ok()) {
    c.Error(at, "match(): file '" + file + "': " + built.status().message());
    return false;
  }
  st->match_table = std::move(*built);
  return true;
}

}  // namespace

const Function kMatch = {
    .name = "match",
    .kind = Kind::kTransform,
    .params = kMatchParams,
    .doc = "events enriched with the lookup file's row whose column equals the field",
    .stage = &Build,
    .negatable = true,
};

}  // namespace sediment::query::functions
