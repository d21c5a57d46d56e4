// sample(percentage=1, field=@timestamp): keeps about `percentage` percent of the records. A
// per-record stage.
//
// Deviation: LogScale samples at random; sediment decides by the value of `field`, so that the
// same query over the same events keeps the same records on every run and every node: a record
// is kept when MurmurHash3 (x86, 32 bits, seed 0) of the field's text, as a fraction of 2^32,
// is below percentage / 100. Records with equal values are kept or dropped together (with the
// default @timestamp, events of the same millisecond). Records without the field are dropped
// (as LogScale documents).
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "percentage", .type = Type::kString, .unnamed = true, .default_value = "1"},
    {.name = "field", .type = Type::kField, .default_value = "@timestamp"},
};

bool Build(Call& c, Stage* st) {
  std::optional<double> pct = ParseNumber(c.String("percentage"));
  if (!pct || !(*pct > 0) || *pct > 100) {
    c.BadParam("percentage", "a number above 0 and at most 100");
    return false;
  }
  const double fraction = *pct / 100.0;
  std::string field = c.String("field");
  SetRecordFunction(st,
                    [field, fraction](Record& r) {
                      std::string scratch;
                      std::optional<std::string_view> v = r.Get(field, &scratch);
                      if (!v) return false;
                      return static_cast<double>(Murmur3(*v, 0)) / 4294967296.0 < fraction;
                    },
                    {field});
  return true;
}

}  // namespace

const Function kSample = {
    .name = "sample",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "keeps about a percentage of the records",
    .stage = &Build,
};

}  // namespace sediment::query::functions
