// test(expression): keeps the records for which the expression is true (a filter over an
// expression of eval(): `test(bytes > 2 * ms)`). A per-record stage.
//
// Truth as for if() and the logical operators: no value (a missing field, non-numeric
// arithmetic), 0, "", "false" and numeric text equal to 0 are false.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

namespace sediment::query::functions {

bool ExpressionFields(const Expr& e, std::vector<std::string>* out) {
  bool known = true;
  switch (e.kind) {
    case Expr::Kind::kField:
      out->push_back(e.text);
      break;
    case Expr::Kind::kCall:
      if (e.text == "getfield") known = false;  // a name known at run time
      break;
    case Expr::Kind::kStage:
      if (e.stage->kind == Stage::Kind::kFunction) {
        out->insert(out->end(), e.stage->function_fields.begin(), e.stage->function_fields.end());
        known = !e.stage->function_reads_all;
      } else if (e.stage->kind == Stage::Kind::kRegex) {
        out->push_back(e.stage->field.empty() ? kRawstringField : e.stage->field);
      } else {
        known = false;
      }
      break;
    default:
      break;
  }
  for (const ExprPtr& a : e.args) {
    if (a && !ExpressionFields(*a, out)) known = false;
  }
  return known;
}

bool ValueIsTrue(const std::optional<Value>& v) {
  if (!v) return false;
  if (const auto* i = std::get_if<int64_t>(&*v)) return *i != 0;
  if (const auto* d = std::get_if<double>(&*v)) return *d != 0;
  const std::string& s = std::get<std::string>(*v);
  if (s.empty() || s == "false") return false;
  if (std::optional<double> n = ParseNumber(s)) return *n != 0;
  return true;
}

namespace {

bool Build(Call& c, Stage* st) {
  ExprPtr e = c.expression;
  if (!e) {
    c.Error(c.position(), "missing expression for test()");
    return false;
  }
  std::vector<std::string> fields;
  const bool known = ExpressionFields(*e, &fields);
  SetRecordFunction(
      st, [e](Record& r) { return ValueIsTrue(Evaluate(*e, r)); }, std::move(fields),
      /*reads_all=*/!known);
  return true;
}

}  // namespace

const Function kTest = {
    .name = "test",
    .kind = Kind::kTransform,
    .params = {},
    .doc = "keeps the records for which an expression is true",
    .stage = &Build,
    .syntax = Syntax::kExpression,
};

}  // namespace sediment::query::functions
