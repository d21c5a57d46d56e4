// setTimeInterval(start, end=now, timezone): the query sets its own time range, overriding the
// one it is run with (the request's start/end). Must be the query's first step; no stage of its
// own (the parser moves the range to CompiledQuery::time_interval; the server resolves it with
// ParseTimeRange before running the query).
//
// `start` and `end` are time bounds as the query API takes them: relative ("7d", "1h", "15m"),
// epoch milliseconds, ISO-8601, or "now" (end only by default). Not supported: `timezone`.
#include <string>
#include <utility>

#include "query/functions/list.h"
#include "query/query.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "start", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "end", .type = Type::kString, .default_value = "now"},
    {.name = "timezone", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  for (const char* param : {"start", "end"}) {
    // Any fixed "now" checks the syntax; the server resolves the bounds when the query runs.
    if (!ParseTimeBound(c.String(param), 0).ok()) {
      c.BadParam(param, "a time such as 7d, 1h, epoch milliseconds or 2024-01-01T00:00:00Z");
      return false;
    }
  }
  st->kind = Stage::Kind::kFilter;  // no stage: the parser takes the range and drops the step
  st->time_interval = std::make_pair(c.String("start"), c.String("end"));
  return true;
}

}  // namespace

const Function kSetTimeInterval = {
    .name = "setTimeInterval",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "sets the query's own time range",
    .stage = &Build,
};

}  // namespace sediment::query::functions
