// parseInt(field, as, radix=16, endian=big): an unsigned integer written in another base,
// converted to a decimal integer. A per-record stage.
//
// The text (surrounding spaces and tabs dropped; with radix 16 a leading `0x` or `16#` too) must
// be digits of `radix` (2 to 36; letters of either case for digits above 9). With endian=little
// (radix 16 only) the digit pairs are read in reverse order: LogScale's `8001` is 0x0180 = 384.
// The output goes to `as`, by default the field itself: an integer, or its decimal text when it
// exceeds the largest signed 64-bit integer. A missing field, a text that is not such a number,
// an odd number of digits with endian=little, or a value above 2^64 - 1 sets nothing.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField},
    {.name = "radix", .type = Type::kLimit, .default_value = "16", .max = 36},
    {.name = "endian", .type = Type::kString, .default_value = "big"},
};

int DigitOf(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

std::optional<uint64_t> ParseUnsigned(std::string_view s, int radix, bool little) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (radix == 16) {
    if (s.starts_with("0x") || s.starts_with("0X")) {
      s.remove_prefix(2);
    } else if (s.starts_with("16#")) {
      s.remove_prefix(3);
    }
  }
  if (s.empty()) return std::nullopt;
  std::string digits(s);
  if (little) {
    if (digits.size() % 2 != 0) return std::nullopt;
    std::string reversed;
    for (size_t i = digits.size(); i >= 2; i -= 2) reversed.append(digits, i - 2, 2);
    digits = std::move(reversed);
  }
  uint64_t v = 0;
  const uint64_t r = static_cast<uint64_t>(radix);
  for (char c : digits) {
    const int d = DigitOf(c);
    if (d >= radix) return std::nullopt;
    if (v > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(d)) / r) {
      return std::nullopt;
    }
    v = v * r + static_cast<uint64_t>(d);
  }
  return v;
}

bool Build(Call& c, Stage* st) {
  const int radix = static_cast<int>(c.Limit("radix"));
  if (radix < 2) {
    c.BadParam("radix", "an integer base from 2 to 36");
    return false;
  }
  const std::string endian = Lower(c.String("endian"));
  if (endian != "big" && endian != "little") {
    c.BadParam("endian", "big or little");
    return false;
  }
  const bool little = endian == "little";
  if (little && radix != 16) {
    c.BadParam("endian", "big (endian=little reads hexadecimal digit pairs: radix=16)");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, radix, little](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        if (!text) return true;
        std::optional<uint64_t> v = ParseUnsigned(*text, radix, little);
        if (!v) return true;
        if (*v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          r.Set(as, Value(static_cast<int64_t>(*v)));
        } else {
          r.Set(as, Value(std::to_string(*v)));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kParseInt = {
    .name = "parseInt",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "an integer in another base converted to decimal",
    .stage = &Build,
};

}  // namespace sediment::query::functions
