// array:eval(array, function, asArray, var), array:filter(array, function, asArray, var),
// objectArray:eval(array, asArray, function, var) and
// objectArray:exists(array, condition, var): a subquery run once per element of an array.
// Per-record stages. Arrays are read as the other array functions read them (array.cc): the
// elements name[0], name[1], ... up to the first missing index.
//
// For each element, in index order, the subquery (`function` / `condition`: filters and
// per-record steps, no collecting function) runs over a copy of the event in which `var` (by
// default the array's name without "[]") holds the element:
// - array:eval: var is the element's value; the value the function leaves in the field named like
//   the output array without "[]" (asArray, by default the input array itself) becomes the next
//   element of the output array, which replaces any array of that name (compacted: elements for
//   which the function drops the event or sets nothing are left out). Nothing else the function
//   sets is kept.
// - objectArray:eval: the element is an object (name[i].x, name[i].y.z, name[i][0], or a plain
//   value name[i]); in the copy var.x, var.y.z, var[0] (or var itself) hold its members. The output
//   array (required, not the input array) is built as by array:eval.
// - array:filter: var is the element's value; the elements for which the function (filters and
//   per-record steps) passes the event are kept, in order, as the output array (asArray, by
//   default the input array itself), which replaces any array of that name.
// - objectArray:exists: keeps the event when the condition passes for at least one element (the
//   event passes unchanged); negatable. `condition` may also be a filter function such as in().
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kArrayEvalParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "function", .type = Type::kRaw, .required = true},
    {.name = "asArray", .type = Type::kField},
    {.name = "var", .type = Type::kField},
};
constexpr Param kArrayFilterParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "function", .type = Type::kRaw, .required = true},
    {.name = "asArray", .type = Type::kField},
    {.name = "var", .type = Type::kField},
};
constexpr Param kObjectEvalParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "asArray", .type = Type::kField, .required = true},
    {.name = "function", .type = Type::kRaw, .required = true},
    {.name = "var", .type = Type::kField},
};
constexpr Param kObjectExistsParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "condition", .type = Type::kRaw, .required = true},
    {.name = "var", .type = Type::kField},
};

std::string Element(const std::string& base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

// The array name of parameter `param` without its "[]"; false (error recorded) when empty.
bool BaseOf(Call& c, std::string_view param, std::string* base) {
  *base = c.String(param);
  if (base->ends_with("[]")) base->resize(base->size() - 2);
  if (base->empty()) {
    c.BadParam(param, "an array name such as \"a[]\"");
    return false;
  }
  return true;
}

// The members of each element of the object array `base` in `r`: per index, (suffix, value)
// pairs ("" for name[i] itself, ".x" for name[i].x, "[0]" for name[i][0]), for the indexes 0, 1,
// ... up to the first with no field.
std::vector<std::vector<std::pair<std::string, Value>>> ObjectElements(const Record& r,
                                                                       const std::string& base) {
  std::map<size_t, std::vector<std::pair<std::string, Value>>> by_index;
  const std::string open = base + "[";
  for (auto& [name, value] : r.ToRow()) {
    if (!name.starts_with(open)) continue;
    size_t p = open.size();
    size_t index = 0;
    const size_t digits = p;
    while (p < name.size() && name[p] >= '0' && name[p] <= '9' && p - digits < 9) {
      index = index * 10 + static_cast<size_t>(name[p] - '0');
      ++p;
    }
    if (p == digits || p >= name.size() || name[p] != ']') continue;
    if (name[digits] == '0' && p - digits > 1) continue;  // no leading zeros
    by_index[index].emplace_back(name.substr(p + 1), std::move(value));
  }
  std::vector<std::vector<std::pair<std::string, Value>>> out;
  for (auto& [index, members] : by_index) {
    if (index != out.size()) break;
    out.push_back(std::move(members));
  }
  return out;
}

// Replaces the array `out_base` of `r` by `values`.
void WriteArray(Record& r, const std::string& out_base, std::vector<Value> values) {
  for (size_t i = 0; r.Has(Element(out_base, i)); ++i) r.Remove(Element(out_base, i));
  for (size_t i = 0; i < values.size(); ++i) r.Set(Element(out_base, i), std::move(values[i]));
}

// The function's output for one element: runs `stages` over `copy` (the element already set) and
// reads `out_base` from the record that comes out.
std::optional<Value> EvalElement(const std::vector<Stage>& stages, Record copy,
                                 const std::string& out_base) {
  copy.Remove(out_base);
  Record result;
  if (!RunsThrough(stages, std::move(copy), &result)) return std::nullopt;
  return result.GetValue(out_base);
}

// The arguments array:eval() and array:filter() share: the input array, the output array
// (asArray, by default the input), the per-element function and the element's field (var, by
// default the array's name).
struct PerElement {
  std::string base, out_base, var;
  std::vector<Stage> stages;
};

bool PerElementOf(Call& c, bool filter_call, PerElement* out) {
  if (!BaseOf(c, "array", &out->base)) return false;
  if (c.Given("asArray")) {
    if (!BaseOf(c, "asArray", &out->out_base)) return false;
  } else {
    out->out_base = out->base;
  }
  if (!SubqueryStages(c, "function", *c.Value("function"), filter_call, &out->stages)) {
    return false;
  }
  out->var = c.Given("var") ? c.String("var") : out->base;
  return true;
}

bool BuildArrayEval(Call& c, Stage* st) {
  PerElement a;
  if (!PerElementOf(c, /*filter_call=*/false, &a)) return false;
  SetRecordFunction(
      st,
      [base = a.base, out_base = a.out_base, var = a.var, stages = std::move(a.stages)](Record& r) {
        std::vector<Value> values;
        std::string scratch;
        for (size_t i = 0;; ++i) {
          std::optional<std::string_view> v = r.Get(Element(base, i), &scratch);
          if (!v) break;
          Record copy = r;
          copy.Set(var, Value(std::string(*v)));
          if (std::optional<Value> out = EvalElement(stages, std::move(copy), out_base)) {
            values.push_back(std::move(*out));
          }
        }
        WriteArray(r, out_base, std::move(values));
        return true;
      },
      {}, /*reads_all=*/true);  // the elements, and whatever the function reads
  return true;
}

bool BuildArrayFilter(Call& c, Stage* st) {
  PerElement a;
  if (!PerElementOf(c, /*filter_call=*/true, &a)) return false;
  SetRecordFunction(
      st,
      [base = a.base, out_base = a.out_base, var = a.var, stages = std::move(a.stages)](Record& r) {
        std::vector<Value> kept;
        std::string scratch;
        for (size_t i = 0;; ++i) {
          std::optional<std::string_view> v = r.Get(Element(base, i), &scratch);
          if (!v) break;
          Value element{std::string(*v)};
          Record copy = r;
          copy.Set(var, element);
          if (RunsThrough(stages, std::move(copy), nullptr)) kept.push_back(std::move(element));
        }
        WriteArray(r, out_base, std::move(kept));
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

// `copy` with the members of one object element set under `var`.
Record WithElement(const Record& r, const std::string& var,
                   const std::vector<std::pair<std::string, Value>>& members) {
  Record copy = r;
  for (const auto& [suffix, value] : members) copy.Set(var + suffix, value);
  return copy;
}

bool BuildObjectEval(Call& c, Stage* st) {
  std::string base, out_base;
  if (!BaseOf(c, "array", &base) || !BaseOf(c, "asArray", &out_base)) return false;
  if (out_base == base) {
    c.BadParam("asArray", "an output array other than the input array");
    return false;
  }
  std::vector<Stage> stages;
  if (!SubqueryStages(c, "function", *c.Value("function"), /*filter_call=*/false, &stages)) {
    return false;
  }
  std::string var = c.Given("var") ? c.String("var") : base;
  SetRecordFunction(
      st,
      [base, out_base, var, stages = std::move(stages)](Record& r) {
        std::vector<Value> values;
        for (const auto& members : ObjectElements(r, base)) {
          if (std::optional<Value> out =
                  EvalElement(stages, WithElement(r, var, members), out_base)) {
            values.push_back(std::move(*out));
          }
        }
        WriteArray(r, out_base, std::move(values));
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

bool BuildObjectExists(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  std::vector<Stage> condition;
  if (!SubqueryStages(c, "condition", *c.Value("condition"), /*filter_call=*/true, &condition)) {
    return false;
  }
  std::string var = c.Given("var") ? c.String("var") : base;
  SetRecordFunction(
      st,
      [base, var, condition = std::move(condition)](Record& r) {
        for (const auto& members : ObjectElements(r, base)) {
          if (RunsThrough(condition, WithElement(r, var, members), nullptr)) return true;
        }
        return false;
      },
      {}, /*reads_all=*/true);
  return true;
}

}  // namespace

const Function kArrayEval = {
    .name = "array:eval",
    .kind = Kind::kTransform,
    .params = kArrayEvalParams,
    .doc = "a new array from a subquery run on each element of an array",
    .stage = &BuildArrayEval,
};
const Function kArrayFilter = {
    .name = "array:filter",
    .kind = Kind::kTransform,
    .params = kArrayFilterParams,
    .doc = "the elements of an array for which a function passes",
    .stage = &BuildArrayFilter,
};
const Function kObjectArrayEval = {
    .name = "objectArray:eval",
    .kind = Kind::kTransform,
    .params = kObjectEvalParams,
    .doc = "a new array from a subquery run on each object of an array of objects",
    .stage = &BuildObjectEval,
};
const Function kObjectArrayExists = {
    .name = "objectArray:exists",
    .kind = Kind::kTransform,
    .params = kObjectExistsParams,
    .doc = "keeps events with an object in an array of objects satisfying a condition",
    .stage = &BuildObjectExists,
    .negatable = true,
};

}  // namespace sediment::query::functions
