// The per-record implementations of the transform functions, each defined in its function's
// file (functions/*.cc) and called directly by the transform dispatch in transform.cc
// (ApplyTransformInPlace / ApplyTransform switch on Stage::kind): no virtual call, no table
// lookup and no allocation added per record. Internal to sediment_query; reentrant.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/compiled.h"
#include "query/record.h"

namespace sediment::query::functions {

// regex.cc: sets the named groups of the first match of st.re in st.field; false when the
// record is dropped (strict and no match).
bool ApplyRegex(const Stage& st, Record& r);
// parse_json.cc: the members of the JSON object in st.field become fields.
void ApplyParseJson(const Stage& st, Record& r);
// kv_parse.cc: the key=value pairs of st.field become fields.
void ApplyKvParse(const Stage& st, Record& r);
// format_time.cc: st.field (ms) formatted into st.as.
void ApplyFormatTime(const Stage& st, Record& r);
// split.cc: one record per element of the array st.field, appended to *out.
void ApplySplit(const Stage& st, Record&& r, std::vector<Record>* out);
// select_drop.cc: keeps only st.fields, in that order.
void ApplySelect(const Stage& st, Record& r);

// format_time.cc: offset in seconds east of UTC: "UTC", "GMT", "Z" (any case), optionally
// followed by an offset, or an offset "+HH", "+HHMM", "+HH:MM" (sign required, at most 18:00).
std::optional<int32_t> ParseTimezone(std::string_view tz);

// ---- helpers shared by the implementations ----

inline const std::string kRawstringField = "@rawstring";

// `field`, or `fallback` when it is empty (stages built by hand in tests leave fields empty).
inline const std::string& FieldOr(const std::string& field, const std::string& fallback) {
  return field.empty() ? fallback : field;
}

// Integer text (optional sign, digits only) that fits int64.
inline std::optional<int64_t> ParseInt(std::string_view s) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Whether `d` is integral and converts to int64 exactly.
inline bool FitsInt64(double d) {
  return std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 &&
         d < 9223372036854775808.0;
}

}  // namespace sediment::query::functions
