// default(value, field, replaceEmpty=false): gives fields a value where they are missing (or
// empty, with replaceEmpty). A per-record stage.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "value", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kFields, .required = true},
    {.name = "replaceEmpty", .type = Type::kBool, .default_value = "false"},
};

bool Build(Call& c, Stage* st) {
  std::vector<std::string> fields = c.Fields("field");
  const bool replace_empty = c.Bool("replaceEmpty");
  std::vector<std::string> touched = fields;
  SetRecordFunction(
      st,
      [fields = std::move(fields), value = c.String("value"), replace_empty](Record& r) {
        std::string scratch;
        for (const std::string& f : fields) {
          std::optional<std::string_view> v = r.Get(f, &scratch);
          if (!v || (replace_empty && v->empty())) r.Set(f, Value(value));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kDefault = {
    .name = "default",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "sets fields that are missing (or empty) to a value",
    .stage = &Build,
};

}  // namespace sediment::query::functions
