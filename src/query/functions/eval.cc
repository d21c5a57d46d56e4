// eval(field = expression, ...): assignments applied in order (the step `field := expression`
// is one; the parser builds it). The parser reads the assignments (Syntax::kAssignments);
// transform.cc evaluates them.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kEval;
  st->assignments = std::move(c.assignments);
  return true;
}

}  // namespace

const Function kEval = {
    .name = "eval",
    .kind = Kind::kTransform,
    .params = {},
    .doc = "sets fields to the values of expressions",
    .stage = &Build,
    .syntax = Syntax::kAssignments,
};

}  // namespace sediment::query::functions
