// eventFieldCount(as=_eventFieldCount): the number of fields of an event, into a field. A
// per-record stage.
//
// sediment's count (LogScale counts the fields its storage uses internally): the fields of the
// event that are neither built-ins (@rawstring, @timestamp, @id, ...) nor tags (#type, #repo,
// ...), including the ones earlier stages of the query set. As LogScale documents, only events
// are counted: a row of an aggregate gets no count.
#include <cstdint>
#include <string>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "as", .type = Type::kField, .default_value = "_eventFieldCount"},
};

bool Build(Call& c, Stage* st) {
  std::string as = c.String("as");
  SetRecordFunction(
      st,
      [as](Record& r) {
        if (!r.is_event()) return true;
        int64_t n = 0;
        for (const auto& [name, value] : r.ToRow()) {
          if (!name.empty() && name[0] != '@' && name[0] != '#' && name != as) ++n;
        }
        r.Set(as, Value(n));
        return true;
      },
      {as}, /*reads_all=*/true);
  return true;
}

}  // namespace

const Function kEventFieldCount = {
    .name = "eventFieldCount",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the number of fields of an event",
    .stage = &Build,
};

}  // namespace sediment::query::functions
