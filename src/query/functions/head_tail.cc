// head(limit=200): the oldest records; tail(limit=200): the newest. Collected by
// KeptRowsCollector (aggregate.cc).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "limit",
     .type = Type::kLimit,
     .unnamed = true,
     .default_value = "200",
     .max = kMaxRows,
     .max_alias = true},
};

template <Stage::Kind K>
bool Build(Call& c, Stage* st) {
  st->kind = K;
  st->limit = c.Limit("limit");
  return true;
}

}  // namespace

const Function kHead = {
    .name = "head",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the oldest records",
    .stage = &Build<Stage::Kind::kHead>,
};
const Function kTail = {
    .name = "tail",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "the newest records",
    .stage = &Build<Stage::Kind::kTail>,
};

}  // namespace sediment::query::functions
