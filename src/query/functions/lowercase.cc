// lowercase(field, include=values): lower-cases the values and/or the names of fields (LogScale's
// parser function; lower() is the query one). A per-record stage.
//
// With include=fields or both, a named field's value is also set under its lower-cased name and
// the original stays; with field="*" every field but the built-ins (@...) and tags (#...) is
// changed and only the lower-cased fields remain.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "include", .type = Type::kString, .default_value = "values"},
    {.name = "locale", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  const std::string include = Lower(c.String("include"));
  if (include != "values" && include != "fields" && include != "both") {
    c.BadParam("include", "values, fields or both");
    return false;
  }
  const bool values = include != "fields";
  const bool names = include != "values";
  std::vector<std::string> fields = c.Fields("field");
  const bool all = fields.size() == 1 && fields[0] == "*";
  auto change = [values](Value v) {
    if (const auto* s = std::get_if<std::string>(&v); s != nullptr && values) {
      return Value(MapCaseText(*s, false));
    }
    return v;
  };
  if (all) {
    SetRecordFunction(
        st,
        [change, names](Record& r) {
          for (auto& [name, value] : r.ToRow()) {
            if (name.empty() || name[0] == '@' || name[0] == '#') continue;
            std::string to = names ? MapCaseText(name, false) : name;
            if (to != name) r.Remove(name);
            r.Set(to, change(std::move(value)));
          }
          return true;
        },
        {}, /*reads_all=*/true);
    return true;
  }
  std::vector<std::string> touched = fields;
  for (const std::string& f : fields) touched.push_back(MapCaseText(f, false));
  SetRecordFunction(
      st,
      [fields = std::move(fields), change, names](Record& r) {
        for (const std::string& f : fields) {
          std::optional<Value> v = r.GetValue(f);
          if (!v) continue;
          r.Set(names ? MapCaseText(f, false) : f, change(std::move(*v)));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kLowercase = {
    .name = "lowercase",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "lower-cases the values and/or names of fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
