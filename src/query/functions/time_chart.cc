// timeChart(series, function=count(), span=auto, limit=10) and bucket(span=auto, field,
// function=count(), limit=10): the metrics per time bucket (and series value). Collected by
// AggregateCollector (aggregate.cc, Grouping::kBucket).
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "query/functions/list.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kTimeChartParams[] = {
    {.name = "series", .type = Type::kFields, .unnamed = true},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "span", .type = Type::kSpan, .default_value = "auto"},
    {.name = "limit", .type = Type::kLimit, .default_value = "10", .max = kMaxSeries},
    {.name = "buckets", .type = Type::kLimit, .max = 1500},
    {.name = "minSpan", .type = Type::kSpan},
    {.name = "unit", .type = Type::kRaw},
    // LogScale parameter not implemented (buckets are UTC-aligned).
    {.name = "timezone", .type = Type::kUnsupported},
};
constexpr Param kBucketParams[] = {
    {.name = "field", .type = Type::kFields},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "span", .type = Type::kSpan, .unnamed = true, .default_value = "auto"},
    {.name = "limit", .type = Type::kLimit, .default_value = "10", .max = kMaxSeries},
    {.name = "buckets", .type = Type::kLimit, .max = 1500},
    {.name = "minSpan", .type = Type::kSpan},
    {.name = "unit", .type = Type::kRaw},
    // LogScale parameter not implemented (buckets are UTC-aligned).
    {.name = "timezone", .type = Type::kUnsupported},
};

// A time unit of timeChart(unit=): "span" / "bucket" (0: the bucket span) or a unit such as
// "sec", "min", "hour", "day".
std::optional<int64_t> UnitTime(std::string_view t) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  if (t == "span" || t == "bucket") return 0;
  std::optional<int64_t> ms = ParseSpan("1" + std::string(t));
  if (!ms || *ms <= 0) return std::nullopt;
  return ms;
}

std::string Trim(std::string_view t) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return std::string(t);
}

// "<unit>/<time> to <prefix><unit>/<time>" (LogScale's rate conversions: "bytes/span to
// Mi bytes/day", "events/sec to Ki/day"); the prefix is K M G T P (powers of 1000) or Ki Mi Gi
// Ti Pi (powers of 1024), and the target unit is the source's or nothing.
std::optional<Stage::UnitConversion> ParseUnit(std::string_view s) {
  const size_t to = s.find(" to ");
  if (to == std::string_view::npos) return std::nullopt;
  std::string_view from = s.substr(0, to), target = s.substr(to + 4);
  const size_t fs = from.rfind('/'), ts = target.rfind('/');
  if (fs == std::string_view::npos || ts == std::string_view::npos) return std::nullopt;
  std::optional<int64_t> from_ms = UnitTime(from.substr(fs + 1));
  std::optional<int64_t> to_ms = UnitTime(target.substr(ts + 1));
  if (!from_ms || !to_ms) return std::nullopt;
  const std::string unit = Trim(from.substr(0, fs));
  std::string_view t = target.substr(0, ts);
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  double divisor = 1;
  static constexpr std::string_view kPrefixes = "KMGTP";
  if (!t.empty() && kPrefixes.find(t[0] == 'k' ? 'K' : t[0]) != std::string_view::npos &&
      Trim(t) != unit) {
    const int power = static_cast<int>(kPrefixes.find(t[0] == 'k' ? 'K' : t[0])) + 1;
    const bool binary = t.size() > 1 && t[1] == 'i';
    divisor = std::pow(binary ? 1024.0 : 1000.0, power);
    t.remove_prefix(binary ? 2 : 1);
  }
  const std::string rest = Trim(t);
  if (!rest.empty() && rest != unit) return std::nullopt;
  return Stage::UnitConversion{*from_ms, *to_ms, divisor};
}

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
  if (c.Given("buckets")) {
    st->buckets = c.Limit("buckets");
    if (st->buckets < 1) {
      c.BadParam("buckets", "an integer from 1 to 1500");
      return false;
    }
    if (c.Given("span")) {
      c.BadParam("buckets", "either span or buckets, not both");
      return false;
    }
  }
  st->min_span_ms = c.Limit("minSpan");
  if (!SetMetrics(c, "function", st)) return false;
  if (const ArgValue* u = c.Value("unit")) {
    for (const ArgValue* item : ItemsOf(*u)) {
      std::optional<Stage::UnitConversion> conv;
      if (item->kind == ArgValue::Kind::kScalar) conv = ParseUnit(item->text);
      if (!conv) {
        c.BadValue("unit", *item, "a conversion such as \"bytes/span to Kbytes/day\"");
        return false;
      }
      st->units.push_back(*conv);
    }
    if (st->units.size() != 1 && st->units.size() != st->metrics.size()) {
      c.BadParam("unit", "one conversion, or one per function");
      return false;
    }
  }
  return true;
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
