// formatDuration(field, as=field, from=ms, precision=0): an integer duration formatted as a human
// readable text of units (23452553 ms -> "6h30m52s553ms"). A per-record stage.
//
// The units are d, h, m, s, ms, us, ns, from the largest non-zero one down to `from` (`from` is
// the unit of the input: d, h, m, s, ms, us or ns); units that are zero are left out. With
// precision=N > 0 only the N largest units from the first non-zero one are used (the rest is cut,
// not rounded). Choices where LogScale's documentation leaves room: 0 is "0" followed by the
// `from` unit; a negative duration is "-" and the text of its absolute value; a value that is not
// an integer (a float, text) leaves the field as it is.
#include <cstdint>
#include <string>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kString},
    {.name = "from", .type = Type::kString, .default_value = "ms"},
    {.name = "precision", .type = Type::kLimit, .default_value = "0", .max = 7},
};

struct Unit {
  const char* name;
  int64_t ns;  // nanoseconds in one unit
};
constexpr Unit kUnits[] = {
    {"d", 86'400'000'000'000},
    {"h", 3'600'000'000'000},
    {"m", 60'000'000'000},
    {"s", 1'000'000'000},
    {"ms", 1'000'000},
    {"us", 1'000},
    {"ns", 1},
};
constexpr int kUnitCount = sizeof(kUnits) / sizeof(kUnits[0]);

// `v` (in units kUnits[from]) as text; the units from kUnits[0] down to kUnits[from].
std::string Format(int64_t v, int from, int64_t precision) {
  if (v == 0) return std::string("0") + kUnits[from].name;
  std::string out;
  // |v| as an unsigned count of `from` units (INT64_MIN has no positive int64).
  uint64_t rest = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (v < 0) out.push_back('-');
  int used = 0;
  bool started = false;
  for (int u = 0; u <= from; ++u) {
    const uint64_t per = static_cast<uint64_t>(kUnits[u].ns / kUnits[from].ns);
    const uint64_t n = rest / per;
    rest %= per;
    if (n == 0 && !started) continue;
    started = true;
    if (precision > 0 && used++ >= precision) break;
    if (n != 0) out += std::to_string(n) + kUnits[u].name;
  }
  return out;
}

bool Build(Call& c, Stage* st) {
  const std::string from_text = Lower(c.String("from"));
  int from = -1;
  for (int u = 0; u < kUnitCount; ++u) {
    if (from_text == kUnits[u].name) from = u;
  }
  if (from < 0) {
    c.BadParam("from", "one of d, h, m, s, ms, us, ns");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  if (as.empty()) {
    c.BadParam("as", "a field name");
    return false;
  }
  const int64_t precision = c.Limit("precision");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, from, precision](Record& r) {
        std::optional<Value> v = r.GetValue(field);
        if (!v) return true;
        std::optional<int64_t> n;
        if (const auto* i = std::get_if<int64_t>(&*v)) {
          n = *i;
        } else if (const auto* s = std::get_if<std::string>(&*v)) {
          n = ParseInt(*s);
        }
        if (n) r.Set(as, Value(Format(*n, from, precision)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

std::string FormatDurationMs(int64_t ms) { return Format(ms, /*from=*/4, /*precision=*/0); }

const Function kFormatDuration = {
    .name = "formatDuration",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "formats an integer duration as a text of units (6h30m52s553ms)",
    .stage = &Build,
};

}  // namespace sediment::query::functions
