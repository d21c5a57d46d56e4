// select(fields): keep only those fields, in that order; drop(fields): remove them. Per-record
// stages (transform.cc applies them).
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "fields", .type = Type::kFields, .unnamed = true, .required = true},
};

template <Stage::Kind K>
bool Build(Call& c, Stage* st) {
  st->kind = K;
  st->fields = c.Fields("fields");
  return true;
}

}  // namespace

const Function kSelect = {
    .name = "select",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "keeps only the given fields, in that order",
    .stage = &Build<Stage::Kind::kSelect>,
};
const Function kDrop = {
    .name = "drop",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "removes the given fields",
    .stage = &Build<Stage::Kind::kDrop>,
};

}  // namespace sediment::query::functions
