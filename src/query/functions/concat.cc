// concat(field, as=_concat): the values of a list of fields joined into one field, as a step of
// its own (`concat([a, b], as=x)`). A per-record stage. The expression function concat(a, "-", b)
// (expression_functions.cc) is the same name in expressions; `x := concat([a, b])` is this step
// with as=x.
//
// `field` is a field name or a list of field names, unquoted (a quoted item is a text, which only
// the expression takes: `x := concat([a, "-", b])` stays the expression). Missing fields are
// skipped, so the output is always set ("" when every field is missing).
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_concat"},
};

bool Build(Call& c, Stage* st) {
  std::vector<std::string> fields;
  for (const ArgValue* v : ItemsOf(*c.Value("field"))) {
    if (v->kind != ArgValue::Kind::kScalar || v->quoted || v->text.empty()) {
      c.BadValue("field", *v, "a field name or a list of field names");
      return false;
    }
    fields.push_back(v->text);
  }
  std::string as = c.String("as");
  std::vector<std::string> touched = fields;
  touched.push_back(as);
  SetRecordFunction(
      st,
      [fields, as](Record& r) {
        std::string out, scratch;
        for (const std::string& f : fields) {
          if (std::optional<std::string_view> v = r.Get(f, &scratch)) out += *v;
        }
        r.Set(as, Value(std::move(out)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kConcat = {
    .name = "concat",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the values of fields joined into one field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
