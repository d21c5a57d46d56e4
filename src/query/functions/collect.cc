// collect(fields, separator, limit=2000, multival=true): the distinct values of a field joined
// into one field of the same name. An aggregate: a step of its own or a metric in function=.
//
// Choices where LogScale's documentation leaves room (it leaves the order undefined): the values
// are output in ascending byte order, the first `limit` of them, so that the answer does not
// depend on how the data was split across workers and nodes. In `separator`, `\n` and `\t`
// stand for a newline and a tab (the default is a newline).
// Deviations: one field per collect() (use [collect(a), collect(b)] for more); multival=false
// (one row per value) is not supported.
#include <string>

#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "fields", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "separator", .type = Type::kString},
    {.name = "limit", .type = Type::kLimit, .default_value = "2000", .max = kMaxGroups},
    {.name = "multival", .type = Type::kBool, .default_value = "true"},
};

std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
      out.push_back(s[++i] == 'n' ? '\n' : '\t');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool BuildMetric(Call& c, Metric* m) {
  const std::vector<std::string>& fields = c.Fields("fields");
  if (fields.size() != 1) {
    c.BadParam("fields", "one field (use [collect(a), collect(b)] for more)");
    return false;
  }
  if (!c.Bool("multival")) {
    c.BadParam("multival", "true (one row per value is not supported)");
    return false;
  }
  if (c.Limit("limit") < 1) {
    c.BadParam("limit", "at least 1");
    return false;
  }
  m->kind = Metric::Kind::kCollect;
  m->field = fields[0];
  m->separator = c.Given("separator") ? Unescape(c.String("separator")) : "\n";
  m->limit = c.Limit("limit");
  return true;
}

}  // namespace

const Function kCollect = {
    .name = "collect",
    .kind = Kind::kAggregate,
    .params = kParams,
    .doc = "the distinct values of a field joined into one",
    .stage = &MetricAsStage,
    .metric = &BuildMetric,
};

}  // namespace sediment::query::functions
