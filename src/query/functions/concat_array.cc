// concatArray(field, as=_concatArray, from=0, to, prefix, separator, suffix): the elements
// field[from], field[from+1], ... (up to field[to], or the first missing index) joined into one
// field. A per-record stage. When field[from] is missing nothing is set.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_concatArray"},
    {.name = "from", .type = Type::kLimit, .default_value = "0"},
    {.name = "to", .type = Type::kLimit},
    {.name = "prefix", .type = Type::kString},
    {.name = "separator", .type = Type::kString},
    {.name = "suffix", .type = Type::kString},
};

bool Build(Call& c, Stage* st) {
  const int64_t from = c.Limit("from");
  const int64_t to = c.Given("to") ? c.Limit("to") : kNoMax;
  if (to < from) {
    c.BadParam("to", "an index not below from");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.String("as");
  SetRecordFunction(
      st,
      [field, as, from, to, prefix = c.String("prefix"), separator = c.String("separator"),
       suffix = c.String("suffix")](Record& r) {
        std::string out = prefix, scratch;
        int64_t k = from;
        for (; k <= to; ++k) {
          std::optional<std::string_view> v =
              r.Get(field + "[" + std::to_string(k) + "]", &scratch);
          if (!v) break;
          if (k > from) out += separator;
          out += *v;
        }
        if (k == from) return true;
        out += suffix;
        r.Set(as, Value(std::move(out)));
        return true;
      },
      {}, /*reads_all=*/true);  // the elements field[i] are read by name at run time
  return true;
}

}  // namespace

const Function kConcatArray = {
    .name = "concatArray",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "joins the elements of an array field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
