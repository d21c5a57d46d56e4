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

void ExpressionFields(const Expr& e, std::vector<std::string>* out) {
  if (e.kind == Expr::Kind::kField) out->push_back(e.text);
  for (const ExprPtr& a : e.args) {
    if (a) ExpressionFields(*a, out);
  }
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

// Whether `e` calls getfield(), which reads a field named at run time.
bool ReadsNamedField(const Expr& e) {
  if (e.kind == Expr::Kind::kCall && e.text == "getfield") return true;
  for (const ExprPtr& a : e.args) {
    if (a && ReadsNamedField(*a)) return true;
  }
  return false;
}

bool Build(Call& c, Stage* st) {
  ExprPtr e = c.expression;
  if (!e) {
    c.Error(c.position(), "missing expression for test()");
    return false;
  }
  std::vector<std::string> fields;
  ExpressionFields(*e, &fields);
  SetRecordFunction(
      st, [e](Record& r) { return ValueIsTrue(Evaluate(*e, r)); }, std::move(fields),
      /*reads_all=*/ReadsNamedField(*e));
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
