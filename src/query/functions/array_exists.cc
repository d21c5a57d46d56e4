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
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "condition", .type = Type::kRaw, .required = true},
    {.name = "var", .type = Type::kField},
};

// Whether a record comes out of `stages` (per-record stages) run over `r`.
bool Passes(const std::vector<Stage>& stages, Record r) {
  std::vector<Record> cur, next;
  cur.push_back(std::move(r));
  for (const Stage& st : stages) {
    next.clear();
    for (Record& x : cur) ApplyTransform(st, std::move(x), &next);
    cur.swap(next);
    if (cur.empty()) return false;
  }
  return true;
}

// The condition's stages from the value of `condition`; false (error recorded) when it is
// neither a subquery of per-record steps nor a filter function call.
bool ConditionStages(Call& c, std::vector<Stage>* out) {
  const ArgValue* v = c.Value("condition");
  constexpr const char* kExpected =
      "a subquery { ... } of filters and per-record steps, or a filter function such as in()";
  if (v->kind == ArgValue::Kind::kSubquery) {
    const Subquery& sq = *v->subquery;
    if (sq.collect < sq.stages.size()) {
      c.Error(sq.stages[sq.collect].position,
              "array:exists(condition=...) cannot hold the collecting function " +
                  sq.stages[sq.collect].function + "()");
      return false;
    }
    *out = sq.stages;
    return true;
  }
  if (v->kind == ArgValue::Kind::kCall) {
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
  c.BadValue("condition", *v, kExpected);
  return false;
}

bool Build(Call& c, Stage* st) {
  std::string base = c.String("array");
  if (base.ends_with("[]")) base.resize(base.size() - 2);
  if (base.empty()) {
    c.BadParam("array", "an array name such as \"a[]\"");
    return false;
  }
  std::vector<Stage> condition;
  if (!ConditionStages(c, &condition)) return false;
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
          if (Passes(condition, std::move(copy))) return true;
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
