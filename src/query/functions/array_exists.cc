// array:exists(array, condition, var): keeps the events with at least one element of the array
// for which the condition holds. A per-record stage (negatable: `!array:exists(...)` keeps the
// events with no such element).
//
// `condition` is a subquery `{ filters | per-record steps }` (no collecting function) or a
// filter function call (`in(x, values=[3, 4])`, `wildcard(...)`). For each element, in index
// order, the condition runs over a copy of the event in which the field `var` (by default the
// array's name without "[]") holds the element; the element satisfies it when a record comes
// out. The event passes unchanged: nothing the condition sets is kept. Arrays are read as in the
// other array:* functions (array.cc): name[0], name[1], ... up to the first missing index.
//
// Also defines RunsThrough() and SubqueryStages() (transforms.h), shared with the other functions
// taking a subquery of per-record steps (array_eval.cc, self_join.cc).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

namespace sediment::query::functions {

bool RunsThrough(const std::vector<Stage>& stages, Record r, Record* out) {
  std::vector<Record> cur, next;
  cur.push_back(std::move(r));
  for (const Stage& st : stages) {
    next.clear();
    for (Record& x : cur) ApplyTransform(st, std::move(x), &next);
    cur.swap(next);
    if (cur.empty()) return false;
  }
  if (out != nullptr) *out = std::move(cur.front());
  return true;
}

bool SubqueryStages(Call& c, std::string_view param, const ArgValue& value, bool filter_call,
                    std::vector<Stage>* out) {
  const ArgValue* v = &value;
  const char* expected =
      filter_call
          ? "a subquery { ... } of filters and per-record steps, or a filter function such as in()"
          : "a subquery { ... } of filters and per-record steps";
  if (v->kind == ArgValue::Kind::kSubquery) {
    const Subquery& sq = *v->subquery;
    if (sq.collect < sq.stages.size()) {
      c.Error(sq.stages[sq.collect].position, c.name() + "(" + std::string(param) +
                                                  "=...) cannot hold the collecting function " +
                                                  sq.stages[sq.collect].function + "()");
      return false;
    }
    *out = sq.stages;
    return true;
  }
  if (filter_call && v->kind == ArgValue::Kind::kCall) {
    const Function* fn = FindPipelineFunction(v->text);
    if (fn != nullptr && fn->kind == Kind::kFilter) {
      Call inner(*fn, v->position, c.err());
      if (!inner.Bind(v->args)) return false;
      FilterPtr f = fn->filter(inner);
      if (!f) return false;
      Stage st;
      st.kind = Stage::Kind::kFilter;
      st.position = v->position;
      st.function = fn->name;
      st.filter = std::move(f);
      out->push_back(std::move(st));
      return true;
    }
  }
  c.BadValue(param, *v, expected);
  return false;
}

namespace {

constexpr Param kParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "condition", .type = Type::kRaw, .required = true},
    {.name = "var", .type = Type::kField},
};

bool Build(Call& c, Stage* st) {
  std::string base = c.String("array");
  if (base.ends_with("[]")) base.resize(base.size() - 2);
  if (base.empty()) {
    c.BadParam("array", "an array name such as \"a[]\"");
    return false;
  }
  std::vector<Stage> condition;
  if (!SubqueryStages(c, "condition", *c.Value("condition"), /*filter_call=*/true, &condition)) {
    return false;
  }
  std::string var = c.Given("var") ? c.String("var") : base;
  SetRecordFunction(
      st,
      [base, var, condition = std::move(condition)](Record& r) {
        std::string scratch;
        for (size_t i = 0;; ++i) {
          std::optional<std::string_view> v = r.Get(base + "[" + std::to_string(i) + "]", &scratch);
          if (!v) return false;
          Record copy = r;
          copy.Set(var, Value(std::string(*v)));
          if (RunsThrough(condition, std::move(copy), nullptr)) return true;
        }
      },
      {}, /*reads_all=*/true);  // the elements, and whatever the condition reads
  return true;
}

}  // namespace

const Function kArrayExists = {
    .name = "array:exists",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "keeps events with an array element satisfying a condition",
    .stage = &Build,
    .negatable = true,
};

}  // namespace sediment::query::functions
