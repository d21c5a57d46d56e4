// The per-record implementations of the transform functions, each defined in its function's
// file (functions/*.cc) and called directly by the transform dispatch in transform.cc
// (ApplyTransformInPlace / ApplyTransform switch on Stage::kind): no virtual call, no table
// lookup and no allocation added per record. Internal to sediment_query; reentrant.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/compiled.h"
#include "query/record.h"

namespace sediment::query::functions {

// regex.cc: sets the named groups of the first match of st.re in st.field; false when the
// record is dropped (strict and no match).
bool ApplyRegex(const Stage& st, Record& r);
// regex(repeat=true) (st.repeat_limit > 0): a copy of `r` per match with that match's groups, at
// most repeat_limit, appended to *out; without a match, `r` itself unless st.strict.
void ApplyRegexRepeat(const Stage& st, Record&& r, std::vector<Record>* out);
// regex.cc: what ApplyRegex does with group `capture` (an index into st.re's captures) of the
// first match in `text`, for a strict, non-repeating stage: kValue with *value (bytes of `text`)
// when it sets the group, kDropped when the record is dropped (no match), kUnsure when the
// record path must decide (the group did not take part in the match: the record keeps what it
// had). `re` is ThreadLocalRegex(st.re).
enum class RegexGroupOutcome { kValue, kDropped, kUnsure };
RegexGroupOutcome RegexGroupOf(const Stage& st, const re2::RE2& re, int capture,
                               std::string_view text, std::string_view* value);
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
// followed by an offset, or an offset "+HH", "+HHMM", "+HH:MM" (sign required, at most 18:00);
// nullopt for anything else, named zones included (TimeZone::Parse takes those too).
std::optional<int32_t> ParseTimezone(std::string_view tz);
// What a `timezone` parameter takes (TimeZone::Parse), for Call::BadParam.
inline constexpr const char* kTimezoneExpected =
    "UTC, a fixed offset such as +02:00 or a time zone name such as Europe/Berlin or PST";
// format_time.cc: days since 1970-01-01 of a proleptic Gregorian date (month 1-12, day 1-31).
int64_t CivilDays(int64_t year, unsigned month, unsigned day);
// transform.cc: `s` lower- or upper-cased as lower()/upper() map it (ASCII, Latin-1, Latin
// Extended-A, Greek, Cyrillic).
std::string MapCaseText(std::string_view s, bool upper);
// hash.cc: MurmurHash3 (x86, 32 bits) of `data` (hash(), tokenHash()).
uint32_t Murmur3(std::string_view data, uint32_t seed);
// format_duration.cc: `ms` milliseconds as formatDuration() writes them with its defaults
// (from=ms, precision=0): "6h30m52s553ms", "0ms".
std::string FormatDurationMs(int64_t ms);
// format.cc: `v` as an integer: int64, a double or a text (integer or decimal) with a whole
// value that fits int64; nullopt otherwise.
std::optional<int64_t> IntegerOf(const Value& v);
// test.cc: the fields an expression reads, appended to *out; false when it may read fields not
// named in it (getField(), a pipeline call that may read any field).
[[nodiscard]] bool ExpressionFields(const Expr& e, std::vector<std::string>* out);
// test.cc: whether a value counts as true (no value, 0, "", "false" and numeric text equal to 0
// are false), as if() and the logical operators of expressions count it.
bool ValueIsTrue(const std::optional<Value>& v);

// array_exists.cc: whether a record comes out of `stages` (per-record stages) run over `r`; the
// first record that comes out goes to *out when out is not null.
bool RunsThrough(const std::vector<Stage>& stages, Record r, Record* out);
class Call;
struct ArgValue;
// array_exists.cc: the stages of `value`, the value (or an item of the list value) of the subquery
// parameter `param` of c (array:exists(condition=), array:eval(function=), selfJoin(where=), ...):
// a subquery `{ ... }` of filters and per-record steps, or with `filter_call` also a filter
// function call such as in(x, values=[...]). False (error recorded on c) for anything else, a
// collecting function included.
[[nodiscard]] bool SubqueryStages(Call& c, std::string_view param, const ArgValue& value,
                                  bool filter_call, std::vector<Stage>* out);

class Call;
// ip_location.cc: the GeoIP databases of the query being compiled (CurrentLookupFiles()->Geo(),
// query/geo.h) when the one c's function needs is open (`city`: the city database, else the ASN
// database); null, with c's error naming the server flag that opens it, otherwise.
std::shared_ptr<const GeoDatabases> RequireGeo(Call& c, bool city);

// geohash.cc: the geohash of `precision` (1 to 12) characters of a point in degrees.
std::string Geohash(double lat, double lon, int64_t precision);
// world_map.cc: the center of the cell of `hash` (a geohash), nullopt when it is not one.
std::optional<std::pair<double, double>> GeohashCenter(std::string_view hash);

// ---- helpers shared by the implementations ----

// A RecordFunction calling `f` (a callable `bool(Record&) const`, copied in; it must be reentrant).
template <typename F>
class LambdaRecordFunction final : public RecordFunction {
 public:
  explicit LambdaRecordFunction(F f) : f_(std::move(f)) {}
  bool Apply(Record& r) const override { return f_(r); }

 private:
  F f_;
};

// Makes `st` a kFunction stage running `f` for each record; `fields` are every field it reads or
// writes (columns.h), `reads_all` when it may read any field.
template <typename F>
void SetRecordFunction(Stage* st, F f, std::vector<std::string> fields, bool reads_all = false) {
  st->kind = Stage::Kind::kFunction;
  st->record_function = std::make_shared<const LambdaRecordFunction<F>>(std::move(f));
  st->function_fields = std::move(fields);
  st->function_reads_all = reads_all;
}

// A RowsFunction calling `f` (a callable `std::vector<Row>(std::vector<Row>,
// std::vector<std::string>*) const`, copied in; it must be reentrant).
template <typename F>
class LambdaRowsFunction final : public RowsFunction {
 public:
  LambdaRowsFunction(F f, bool ignores_input) : f_(std::move(f)), ignores_(ignores_input) {}
  std::vector<Row> Run(std::vector<Row> rows, std::vector<std::string>* warnings) const override {
    return f_(std::move(rows), warnings);
  }
  bool IgnoresInput() const override { return ignores_; }

 private:
  F f_;
  bool ignores_;
};

// Makes `st` a kRows stage running `f` over its whole input.
template <typename F>
void SetRowsFunction(Stage* st, F f, bool ignores_input = false) {
  st->kind = Stage::Kind::kRows;
  st->rows_function = std::make_shared<const LambdaRowsFunction<F>>(std::move(f), ignores_input);
}

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
