// timeChart(series, function=count(), span=auto, limit=10) and bucket(span=auto, field,
// function=count(), limit=10): the metrics per time bucket (and series value). Collected by
// AggregateCollector (aggregate.cc, Grouping::kBucket).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kTimeChartParams[] = {
    {.name = "series", .type = Type::kFields, .unnamed = true},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "span", .type = Type::kSpan, .default_value = "auto"},
    {.name = "limit", .type = Type::kLimit, .default_value = "10", .max = kMaxSeries},
    // LogScale parameters not implemented (buckets are UTC-aligned).
    {.name = "buckets", .type = Type::kUnsupported},
    {.name = "minSpan", .type = Type::kUnsupported},
    {.name = "unit", .type = Type::kUnsupported},
    {.name = "timezone", .type = Type::kUnsupported},
};
constexpr Param kBucketParams[] = {
    {.name = "field", .type = Type::kFields},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "span", .type = Type::kSpan, .unnamed = true, .default_value = "auto"},
    {.name = "limit", .type = Type::kLimit, .default_value = "10", .max = kMaxSeries},
    // LogScale parameters not implemented (buckets are UTC-aligned).
    {.name = "buckets", .type = Type::kUnsupported},
    {.name = "minSpan", .type = Type::kUnsupported},
    {.name = "unit", .type = Type::kUnsupported},
    {.name = "timezone", .type = Type::kUnsupported},
};

// `series` names the series parameter (timeChart: series, bucket: field).
bool Build(Call& c, const char* series, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kBucket;
  st->fields = c.Fields(series);
  st->span_ms = c.Limit("span");
  st->limit = c.Limit("limit");
  if (st->fields.size() > 1) {
    c.BadParam(series, "one field");
    return false;
  }
  return SetMetrics(c, "function", st);
}
bool BuildTimeChart(Call& c, Stage* st) { return Build(c, "series", st); }
bool BuildBucket(Call& c, Stage* st) { return Build(c, "field", st); }

}  // namespace

const Function kTimeChart = {
    .name = "timeChart",
    .kind = Kind::kCollector,
    .params = kTimeChartParams,
    .doc = "the metrics per time bucket (and series value)",
    .stage = &BuildTimeChart,
};
const Function kBucket = {
    .name = "bucket",
    .kind = Kind::kCollector,
    .params = kBucketParams,
    .doc = "timeChart with LogScale's bucket() parameter names",
    .stage = &BuildBucket,
};

}  // namespace sediment::query::functions
