// eventSize(as=_eventSize): the bytes an event's values take in storage, into a field. A
// per-record stage.
//
// sediment's measure (LogScale's is its own storage's): the bytes of @rawstring plus the bytes of
// the text of every field of the event that is neither a built-in (@...) nor a tag (#...); field
// names are not counted. Fields that earlier stages of the query set count as they are then.
// LogScale gives 0 for what is not a stored event: so does sediment for the rows of an aggregate.
#include <cstdint>
#include <string>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "as", .type = Type::kField, .default_value = "_eventSize"},
};

bool Build(Call& c, Stage* st) {
  std::string as = c.String("as");
  SetRecordFunction(
      st,
      [as](Record& r) {
        int64_t size = 0;
        if (r.is_event()) {
          for (const auto& [name, value] : r.ToRow()) {
            if (name == kRawstringField) {
              size += static_cast<int64_t>(ValueToString(value).size());
            } else if (!name.empty() && name[0] != '@' && name[0] != '#') {
              size += static_cast<int64_t>(ValueToString(value).size());
            }
          }
        }
        r.Set(as, Value(size));
        return true;
      },
      {as}, /*reads_all=*/true);
  return true;
}

}  // namespace

const Function kEventSize = {
    .name = "eventSize",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the bytes of an event's values",
    .stage = &Build,
};

}  // namespace sediment::query::functions
