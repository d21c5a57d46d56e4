// The bitfield:* family: decode an integer field into named flags (bit 0 = the lowest bit).
// Per-record stages.
// - bitfield:extractFlags(field, output=[[index, name], ...], onlyTrue=false): each name becomes a
//   field "true" or "false" (onlyTrue: only the true ones are set).
// - bitfield:extractFlagsAsString(field, flagNames=[[index, name], ...], as=_flags,
//   separator=" "): the names of the true flags, lowest bit first, joined ("" when none is set).
// - bitfield:extractFlagsAsArray(field, flagNames=[[index, name], ...], asArray="_flags[]"): the
//   same names as the array asArray[0], asArray[1], ...
//
// Indices are 0..63, each index and each name at most once (a 400 otherwise). The field's value is
// a decimal integer; one beyond 64 bits keeps its lowest 64 bits, a negative one its two's
// complement. Choices where LogScale's documentation leaves room: a missing field, or a value that
// is not a decimal integer, sets nothing; extractFlagsAsArray writes asArray[0..n-1] for its n true
// flags and leaves any elements of an existing array beyond them.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

// A decimal integer's lowest 64 bits (two's complement when negative); nullopt when `s` is not
// an optional '-' or '+' followed by digits only.
std::optional<uint64_t> LowBits(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(ch - '0');  // wraps: modulo 2^64
  }
  return negative ? ~v + 1 : v;
}

using Flags = std::vector<std::pair<int, std::string>>;  // bit index, name; ascending index

// Reads [[index, name], ...] from `param`; false (error recorded) when it is not such a list of
// distinct indices 0..63 and distinct names.
bool FlagsOf(Call& c, std::string_view param, Flags* out) {
  const ArgValue* v = c.Value(param);
  if (v == nullptr || v->kind != ArgValue::Kind::kList || v->list.empty()) {
    c.BadParam(param, "a list of [index, name] pairs");
    return false;
  }
  std::set<int> indices;
  std::set<std::string> names;
  for (const ArgValue& pair : v->list) {
    std::optional<int64_t> index;
    if (pair.kind == ArgValue::Kind::kList && pair.list.size() == 2 &&
        pair.list[0].kind == ArgValue::Kind::kScalar &&
        pair.list[1].kind == ArgValue::Kind::kScalar && !pair.list[1].text.empty()) {
      index = ParseInt(pair.list[0].text);
    }
    if (!index || *index < 0 || *index > 63) {
      c.BadValue(param, pair, "an [index, name] pair with an index from 0 to 63");
      return false;
    }
    const std::string& name = pair.list[1].text;
    if (!indices.insert(static_cast<int>(*index)).second || !names.insert(name).second) {
      c.BadValue(param, pair, "a pair whose index and name are not given before");
      return false;
    }
    out->emplace_back(static_cast<int>(*index), name);
  }
  std::sort(out->begin(), out->end());
  return true;
}

// The bits of `field` in `r`, nullopt when absent or not an integer.
std::optional<uint64_t> BitsOf(const Record& r, const std::string& field) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(field, &scratch);
  if (!text) return std::nullopt;
  return LowBits(*text);
}

bool IsSet(uint64_t bits, int index) { return (bits >> index & 1) != 0; }

constexpr Param kFlagsParams[] = {
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "output", .type = Type::kRaw, .required = true},
    {.name = "onlyTrue", .type = Type::kBool, .default_value = "false"},
};

bool BuildFlags(Call& c, Stage* st) {
  Flags flags;
  if (!FlagsOf(c, "output", &flags)) return false;
  std::string field = c.String("field");
  const bool only_true = c.Bool("onlyTrue");
  std::vector<std::string> touched = {field};
  for (const auto& f : flags) touched.push_back(f.second);
  SetRecordFunction(
      st,
      [field, flags, only_true](Record& r) {
        std::optional<uint64_t> bits = BitsOf(r, field);
        if (!bits) return true;
        for (const auto& [index, name] : flags) {
          const bool set = IsSet(*bits, index);
          if (set || !only_true) r.Set(name, Value(std::string(set ? "true" : "false")));
        }
        return true;
      },
      std::move(touched));
  return true;
}

constexpr Param kStringParams[] = {
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "flagNames", .type = Type::kRaw, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_flags"},
    {.name = "separator", .type = Type::kString, .default_value = "\" \""},
};

bool BuildString(Call& c, Stage* st) {
  Flags flags;
  if (!FlagsOf(c, "flagNames", &flags)) return false;
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::string separator = c.String("separator");
  SetRecordFunction(
      st,
      [field, flags, as, separator](Record& r) {
        std::optional<uint64_t> bits = BitsOf(r, field);
        if (!bits) return true;
        std::string out;
        bool first = true;
        for (const auto& [index, name] : flags) {
          if (!IsSet(*bits, index)) continue;
          if (!first) out += separator;
          out += name;
          first = false;
        }
        r.Set(as, Value(std::move(out)));
        return true;
      },
      std::vector<std::string>{field, as});
  return true;
}

constexpr Param kArrayParams[] = {
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "flagNames", .type = Type::kRaw, .required = true},
    {.name = "asArray", .type = Type::kField, .default_value = "\"_flags[]\""},
};

bool BuildArray(Call& c, Stage* st) {
  Flags flags;
  if (!FlagsOf(c, "flagNames", &flags)) return false;
  std::string field = c.String("field");
  std::string base = c.String("asArray");
  if (!base.ends_with("[]") || base.size() == 2) {
    c.BadParam("asArray", "an array name such as \"flags[]\"");
    return false;
  }
  base.resize(base.size() - 2);
  SetRecordFunction(
      st,
      [field, flags, base](Record& r) {
        std::optional<uint64_t> bits = BitsOf(r, field);
        if (!bits) return true;
        size_t n = 0;
        for (const auto& [index, name] : flags) {
          if (IsSet(*bits, index)) r.Set(base + "[" + std::to_string(n++) + "]", Value(name));
        }
        return true;
      },
      std::vector<std::string>{field});
  return true;
}

}  // namespace

const Function kBitfieldExtractFlags = {
    .name = "bitfield:extractFlags",
    .kind = Kind::kTransform,
    .params = kFlagsParams,
    .doc = "the named bits of an integer as true/false fields",
    .stage = &BuildFlags,
};
const Function kBitfieldExtractFlagsAsString = {
    .name = "bitfield:extractFlagsAsString",
    .kind = Kind::kTransform,
    .params = kStringParams,
    .doc = "the names of the set bits of an integer, joined",
    .stage = &BuildString,
};
const Function kBitfieldExtractFlagsAsArray = {
    .name = "bitfield:extractFlagsAsArray",
    .kind = Kind::kTransform,
    .params = kArrayParams,
    .doc = "the names of the set bits of an integer as an array",
    .stage = &BuildArray,
};

}  // namespace sediment::query::functions
