// The per-record array:* functions, registered with their namespaced names: array:contains(array,
// value), array:regex(array, regex, flags), array:length(array, as=_length), array:append(array,
// values), array:drop(array), array:dedup(array, asArray), array:rename(array, asArray).
//
// An array is the fields name[0], name[1], ... (how ingest and parseJson flatten JSON arrays);
// `array` names it with or without the trailing "[]" ("incidents[]" or "incidents"). As LogScale
// documents, an array is read from index 0 up to the first missing index (elements after a gap
// are not part of it). Elements are read as text.
#include <string>
#include <unordered_set>
#include <vector>

#include <re2/re2.h>

#include "query/aggregate.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

// The array's base name: `name` without a trailing "[]".
std::string ArrayBase(std::string_view name) {
  if (name.ends_with("[]")) name.remove_suffix(2);
  return std::string(name);
}

std::string Element(const std::string& base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

// The elements of array `base` in `r`, from index 0 up to the first missing one.
std::vector<std::string> Elements(const Record& r, const std::string& base) {
  std::vector<std::string> out;
  std::string scratch;
  for (size_t i = 0;; ++i) {
    std::optional<std::string_view> v = r.Get(Element(base, i), &scratch);
    if (!v) break;
    out.emplace_back(*v);
  }
  return out;
}

// Reads `array` into *base; false (error recorded) when it is empty or only "[]".
bool BaseOf(Call& c, std::string_view param, std::string* base) {
  *base = ArrayBase(c.String(param));
  if (base->empty()) {
    c.BadParam(param, "an array name such as \"a[]\"");
    return false;
  }
  return true;
}

// ---- array:contains(array, value) ----

constexpr Param kContainsParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "value", .type = Type::kString, .required = true},
};

bool BuildContains(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  SetRecordFunction(
      st,
      [base, value = c.String("value")](Record& r) {
        std::string scratch;
        for (size_t i = 0;; ++i) {
          std::optional<std::string_view> v = r.Get(Element(base, i), &scratch);
          if (!v) return false;
          if (*v == value) return true;
        }
      },
      {}, /*reads_all=*/true);  // the elements are read by name at run time
  return true;
}

// ---- array:regex(array, regex, flags) ----

constexpr Param kRegexParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "regex", .type = Type::kString, .required = true},
    {.name = "flags", .type = Type::kString},
};

bool BuildRegex(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  std::shared_ptr<const re2::RE2> re = RegexWithFlags(c, /*plain_to_noncapturing=*/true);
  if (!re) return false;
  SetRecordFunction(
      st,
      [base, re](Record& r) {
        std::string scratch;
        for (size_t i = 0;; ++i) {
          std::optional<std::string_view> v = r.Get(Element(base, i), &scratch);
          if (!v) return false;
          if (re2::RE2::PartialMatch(*v, *re)) return true;
        }
      },
      {}, /*reads_all=*/true);
  return true;
}

// ---- array:length(array, as=_length) ----

constexpr Param kLengthParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_length"},
};

bool BuildLength(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  SetRecordFunction(
      st,
      [base, as = c.String("as")](Record& r) {
        std::string scratch;
        int64_t n = 0;
        while (r.Get(Element(base, static_cast<size_t>(n)), &scratch)) ++n;
        r.Set(as, Value(n));
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

// ---- array:append(array, values) ----

constexpr Param kAppendParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "values", .type = Type::kExprs, .required = true},
};

bool BuildAppend(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  std::vector<ExprPtr> values = c.Expressions("values");
  SetRecordFunction(
      st,
      [base, values](Record& r) {
        std::string scratch;
        size_t n = 0;
        while (r.Get(Element(base, n), &scratch)) ++n;
        for (const ExprPtr& e : values) {
          std::optional<Value> v = Evaluate(*e, r);
          if (!v) continue;  // an expression without a value is skipped
          r.Set(Element(base, n++), std::move(*v));
        }
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

// ---- array:drop(array) ----

constexpr Param kDropParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
};

bool BuildDrop(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  SetRecordFunction(
      st,
      [base](Record& r) {
        std::string scratch;
        for (size_t i = 0;; ++i) {
          const std::string name = Element(base, i);
          if (!r.Get(name, &scratch)) break;
          r.Remove(name);
        }
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

// ---- array:dedup(array, asArray) / array:rename(array, asArray) ----

constexpr Param kDedupParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "asArray", .type = Type::kField},
};
constexpr Param kRenameParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "asArray", .type = Type::kField, .required = true},
};

// Replaces array `from` in `r` by `elements` under the name `to` (the old elements are removed).
void WriteArray(Record& r, const std::string& from, size_t old_size, const std::string& to,
                std::vector<std::string> elements) {
  for (size_t i = 0; i < old_size; ++i) r.Remove(Element(from, i));
  for (size_t i = 0; i < elements.size(); ++i) {
    r.Set(Element(to, i), Value(std::move(elements[i])));
  }
}

bool BuildDedup(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  std::string to = c.Given("asArray") ? ArrayBase(c.String("asArray")) : base;
  if (to.empty()) {
    c.BadParam("asArray", "an array name such as \"a[]\"");
    return false;
  }
  SetRecordFunction(
      st,
      [base, to](Record& r) {
        std::vector<std::string> in = Elements(r, base);
        if (in.empty()) return true;
        std::vector<std::string> out;
        std::unordered_set<std::string> seen;
        for (std::string& e : in) {
          if (seen.insert(e).second) out.push_back(e);
        }
        // With asArray the input array stays as it is.
        WriteArray(r, base, to == base ? in.size() : 0, to, std::move(out));
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

bool BuildRename(Call& c, Stage* st) {
  std::string base, to;
  if (!BaseOf(c, "array", &base) || !BaseOf(c, "asArray", &to)) return false;
  SetRecordFunction(
      st,
      [base, to](Record& r) {
        if (base == to) return true;
        std::vector<std::string> in = Elements(r, base);
        const size_t n = in.size();
        WriteArray(r, base, n, to, std::move(in));
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

// ---- array:reduceRow(array, var, function) ----

constexpr Param kReduceRowParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "var", .type = Type::kField, .required = true},
    {.name = "function", .type = Type::kMetrics, .required = true},
};

bool BuildReduceRow(Call& c, Stage* st) {
  std::string base;
  if (!BaseOf(c, "array", &base)) return false;
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  auto agg = std::make_shared<Stage>();
  agg->kind = Stage::Kind::kAggregate;
  agg->grouping = Stage::Grouping::kNone;
  agg->function = c.name();
  agg->metrics = std::move(metrics);
  std::shared_ptr<const Stage> stage = agg;
  SetRecordFunction(
      st,
      [base, stage, var = c.String("var")](Record& r) {
        std::vector<std::string> elements = Elements(r, base);
        if (elements.empty()) return true;
        std::unique_ptr<Collector> col = NewCollector(*stage, CollectorContext{});
        for (size_t i = 0; i < elements.size(); ++i) {
          RecordKey key;
          key.offset = static_cast<int64_t>(i);
          col->Add(Record::FromRow(Row{{var, Value(std::move(elements[i]))}}, key));
        }
        std::vector<std::string> ignored;
        std::vector<Row> out = col->Finish(&ignored);
        if (!out.empty()) {
          for (auto& [k, v] : out[0]) r.Set(k, std::move(v));
        }
        return true;
      },
      {}, /*reads_all=*/true);
  return true;
}

}  // namespace

const Function kArrayReduceRow = {
    .name = "array:reduceRow",
    .kind = Kind::kTransform,
    .params = kReduceRowParams,
    .doc = "aggregates over the elements of each event's array",
    .stage = &BuildReduceRow,
};
const Function kArrayContains = {
    .name = "array:contains",
    .kind = Kind::kTransform,
    .params = kContainsParams,
    .doc = "keeps events whose array holds the value",
    .stage = &BuildContains,
    .negatable = true,
};
const Function kArrayRegex = {
    .name = "array:regex",
    .kind = Kind::kTransform,
    .params = kRegexParams,
    .doc = "keeps events with an array element the regex matches",
    .stage = &BuildRegex,
    .negatable = true,
};
const Function kArrayLength = {
    .name = "array:length",
    .kind = Kind::kTransform,
    .params = kLengthParams,
    .doc = "the number of elements of an array",
    .stage = &BuildLength,
};
const Function kArrayAppend = {
    .name = "array:append",
    .kind = Kind::kTransform,
    .params = kAppendParams,
    .doc = "appends values to an array (or creates it)",
    .stage = &BuildAppend,
};
const Function kArrayDrop = {
    .name = "array:drop",
    .kind = Kind::kTransform,
    .params = kDropParams,
    .doc = "removes the fields of an array",
    .stage = &BuildDrop,
};
const Function kArrayDedup = {
    .name = "array:dedup",
    .kind = Kind::kTransform,
    .params = kDedupParams,
    .doc = "removes duplicate elements of an array, keeping first occurrences",
    .stage = &BuildDedup,
};
const Function kArrayRename = {
    .name = "array:rename",
    .kind = Kind::kTransform,
    .params = kRenameParams,
    .doc = "renames an array",
    .stage = &BuildRename,
};

}  // namespace sediment::query::functions
