// window(function=count(as=_count), buckets, span): aggregates over a sliding window of the
// buckets of the enclosing timeChart() or bucket(), only in their function=. The window of a
// bucket is the `buckets` buckets before it (or those within `span`, rounded to whole buckets);
// the result is in the bucket after the last one contributing, and buckets whose window reaches
// before the query's range have none (LogScale's rules). The window's metrics are the enclosing
// aggregate's own metrics marked Metric::window_*: their per-bucket states are kept as any
// metric's, and FinishBucket (aggregate.cc) computes them over the window's buckets.
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "function",
     .type = Type::kMetrics,
     .unnamed = true,
     .default_value = "count(as=_count)"},
    {.name = "buckets", .type = Type::kLimit, .max = 100000},
    {.name = "span", .type = Type::kSpan},
};

bool Build(Call& c, Stage* st) {
  if (c.Given("buckets") == c.Given("span")) {
    c.Error(c.position(), "window() needs exactly one of buckets= and span=");
    return false;
  }
  const int64_t buckets = c.Limit("buckets");
  const int64_t span = c.Limit("span");
  if (c.Given("buckets") && buckets < 1) {
    c.BadParam("buckets", "a number of buckets from 1 to 100000");
    return false;
  }
  if (c.Given("span") && span <= 0) {
    c.BadParam("span", "a time span such as 15min");
    return false;
  }
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (metrics.empty()) metrics.push_back(CountMetric(c.position()));
  for (Metric& m : metrics) {
    if (m.kind == Metric::Kind::kSubquery) {
      c.Error(m.position, "window() takes aggregate functions such as avg(x), not subqueries");
      return false;
    }
    m.window_buckets = buckets;
    m.window_span_ms = span;
  }
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kNone;
  st->metrics = std::move(metrics);
  return true;
}

}  // namespace

const Function kWindow = {
    .name = "window",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "aggregates over a sliding window of buckets, in function= of timeChart()/bucket()",
    .stage = &Build,
};

}  // namespace sediment::query::functions
