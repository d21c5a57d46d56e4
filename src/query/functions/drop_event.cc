// dropEvent(): drops every record that reaches it (used in a case branch or after a filter, as
// LogScale's parsers use it). A per-record stage.
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

bool Build(Call&, Stage* st) {
  SetRecordFunction(st, [](Record&) { return false; }, {});
  return true;
}

}  // namespace

const Function kDropEvent = {
    .name = "dropEvent",
    .kind = Kind::kTransform,
    .params = {},
    .doc = "drops the records that reach it",
    .stage = &Build,
};

}  // namespace sediment::query::functions
