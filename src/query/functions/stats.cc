// stats(function=[count()]): one row with the metrics of several aggregates (the step
// `[f1(), f2()]` is the same; the parser builds it).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "function", .type = Type::kMetrics, .unnamed = true, .default_value = "[count()]"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kNone;
  return SetMetrics(c, "function", st);
}

}  // namespace

const Function kStats = {
    .name = "stats",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "one row with the metrics of several aggregates",
    .stage = &Build,
};

}  // namespace sediment::query::functions
