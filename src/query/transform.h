// Per-record query functions: filters on one record, expressions, and the transform stages
// (Stage::IsTransform()). Pure functions of their inputs; reentrant.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "query/compiled.h"
#include "query/record.h"
#include "query/time_zone.h"

namespace sediment::query {

// Whether `r` matches `filter` (the same semantics the executor's block-at-a-time evaluation has;
// tags and built-ins are read through Record::Get).
bool Matches(const FilterNode& filter, const Record& r);

// Value of `e` for `r`; nullopt when it has none (a missing field, a non-numeric operand of
// arithmetic, division by zero, an argument out of range). Comparisons and logical operators give
// int64 1 / 0. Never throws on data.
std::optional<Value> Evaluate(const Expr& e, const Record& r);

// Applies the transform stage `st` (st.IsTransform()) to `r` and appends its 0..N output records
// to `out` (in order). Output records keep `r`'s key (split()'s outputs too: their order in
// `out` orders them).
// Never fails on data: a value that cannot be parsed leaves the record as it was (parseJson,
// kvParse, formatTime) or drops it (regex with strict=true, filters).
void ApplyTransform(const Stage& st, Record&& r, std::vector<Record>* out);

// Whether the transform stage `st` gives at most one record for each input (every transform but
// case, split and a function with Stage::function_emits_many), which ApplyTransformInPlace can
// run.
bool EmitsOneOrNone(const Stage& st);
// ApplyTransform for a stage with EmitsOneOrNone(st): changes `r` in place and returns false when
// the stage drops it (`r` is then unspecified).
bool ApplyTransformInPlace(const Stage& st, Record& r);

// Whether kvParse() finds at least one key=value pair (with a non-empty key) in `text`: when it
// does not, kvParse leaves every record as it was. Allocates nothing (the ingest kv parser's test
// before it builds a record).
bool KvParseFindsPairs(std::string_view text);

// A copy of `re` private to the calling thread (made on first use, at most 32 kept per thread).
// RE2 guards the DFA it builds lazily with a reader-writer lock, and threads matching with one
// shared RE2 contend on it; per-thread copies take that cost away. Falls back to `*re` when the
// copy cannot be compiled.
const re2::RE2& ThreadLocalRegex(const std::shared_ptr<const re2::RE2>& re);

// strftime-style formatting of `ms` (milliseconds since the epoch) in `zone`: %Y %m %d %H %M %S
// %L (milliseconds) %j %a %b %e %y %p %I %Z (UTC, +HH:MM or the zone's abbreviation) %z %s (epoch
// seconds) %F %T %%. Unknown conversions are copied as they are.
std::string FormatTime(std::string_view format, int64_t ms, const TimeZone& zone);
// The same in the zone `timezone` names (TimeZone::Parse; UTC when it names none).
std::string FormatTime(std::string_view format, int64_t ms, std::string_view timezone);

}  // namespace sediment::query
