// select(fields): keep only those fields, in that order; drop(fields): remove them. Per-record
// stages (transform.cc applies them).
#include <utility>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

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

// ---- per-record implementation ----

void ApplySelect(const Stage& st, Record& r) {
  Row row;
  row.reserve(st.fields.size());
  for (const std::string& f : st.fields) {
    bool dup = false;
    for (const auto& [k, v] : row) dup = dup || k == f;
    if (dup) continue;
    if (std::optional<Value> v = r.GetValue(f)) row.emplace_back(f, std::move(*v));
  }
  r = Record::FromRow(std::move(row), r.key());
}

}  // namespace sediment::query::functions
