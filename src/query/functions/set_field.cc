// setField(target, value): sets the field whose name is the value of the expression `target` to
// the value of the expression `value` (getField()'s counterpart). Per-record stage.
//
// `target=bar` names the field whose name is bar's value; `target="foo"` names foo. A record for
// which target or value has no value (a missing field, arithmetic on text) is left unchanged; an
// empty name sets nothing.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "target", .type = Type::kExpr, .required = true},
    {.name = "value", .type = Type::kExpr, .required = true},
};

bool Build(Call& c, Stage* st) {
  ExprPtr target = c.Expression("target");
  ExprPtr value = c.Expression("value");
  std::vector<std::string> fields;
  bool known = ExpressionFields(*target, &fields);
  known = ExpressionFields(*value, &fields) && known;
  SetRecordFunction(
      st,
      [target, value](Record& r) {
        std::optional<Value> name = Evaluate(*target, r);
        if (!name) return true;
        const std::string field = ValueToString(*name);
        if (field.empty()) return true;
        if (std::optional<Value> v = Evaluate(*value, r)) r.Set(field, std::move(*v));
        return true;
      },
      std::move(fields), /*reads_all=*/!known);
  return true;
}

}  // namespace

const Function kSetField = {
    .name = "setField",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "sets the field an expression names to an expression's value",
    .stage = &Build,
};

}  // namespace sediment::query::functions
