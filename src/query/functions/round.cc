// round(field, as=field, how=round): a field's number rounded to an integer, written back into
// the field (or into `as`). The step form of the round() expression function. A per-record stage.
//
// how=round rounds half away from zero (2.5 -> 3, -2.5 -> -3, as the expression round()),
// floor down, ceil up. Integers are kept as they are; a value that is not a number, and a
// result outside the int64 range, set nothing.
#include <cmath>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField},
    {.name = "how", .type = Type::kString, .default_value = "round"},
};

enum class How { kRound, kFloor, kCeil };

bool Build(Call& c, Stage* st) {
  const std::string& h = c.String("how");
  How how;
  if (EqualsIgnoreCase(h, "round")) {
    how = How::kRound;
  } else if (EqualsIgnoreCase(h, "floor")) {
    how = How::kFloor;
  } else if (EqualsIgnoreCase(h, "ceil")) {
    how = How::kCeil;
  } else {
    c.BadParam("how", "round, floor or ceil");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, how](Record& r) {
        std::optional<Value> v = r.GetValue(field);
        if (!v) return true;
        if (const auto* s = std::get_if<std::string>(&*v)) {
          if (std::optional<int64_t> i = ParseInt(*s)) {
            v = Value(*i);
          } else if (std::optional<double> d = ParseNumber(*s)) {
            v = Value(*d);
          } else {
            return true;
          }
        }
        if (const auto* i = std::get_if<int64_t>(&*v)) {
          r.Set(as, Value(*i));
          return true;
        }
        const double x = std::get<double>(*v);
        const double d = how == How::kRound   ? std::round(x)
                         : how == How::kFloor ? std::floor(x)
                                              : std::ceil(x);
        if (FitsInt64(d)) r.Set(as, Value(static_cast<int64_t>(d)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kRound = {
    .name = "round",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "rounds a field's number to an integer",
    .stage = &Build,
};

}  // namespace sediment::query::functions
