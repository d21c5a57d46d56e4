// Compile-time helpers shared by the parser (parser.cc) and the query functions (functions/*.cc):
// filter nodes, regexes, spans, metric names. Internal to sediment_query; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/compiled.h"

namespace sediment::query::functions {

// The non-empty runs between '*' characters, lower-cased.
std::vector<std::string> GlobPieces(std::string_view pattern);

// Shortest text that reads back as `v` ("50", "99.9", "-0.5").
std::string FormatNumber(double v);

// Milliseconds of a relative time span such as "1m", "5min", "1 hour", "100ms"; nullopt when
// `s` is not one (calendar months are not fixed spans and are rejected).
std::optional<int64_t> ParseSpan(std::string_view s);

// Rewrites Java/LogScale named groups `(?<name>...)` as RE2's `(?P<name>...)`. With
// `plain_to_noncapturing`, unnamed capturing groups `(...)` become `(?:...)`, so that the capture
// groups of the result are exactly its named groups. Escapes and character classes are skipped.
std::string ConvertRegex(std::string_view p, bool plain_to_noncapturing);

// `source` compiled (RE2 syntax, errors not logged); null with *error set when it does not compile.
std::shared_ptr<const re2::RE2> CompileRegex(const std::string& source, std::string* error);

// The RE2 prefix of a LogScale regex flag ("(?i)" for i, "(?m)" for m, "(?s)" for d), "" when
// `f` is not one.
std::string RegexFlag(char f);

class Call;
// The call's `regex` parameter with its `flags` (i, m, d) compiled as ConvertRegex(regex,
// plain_to_noncapturing) behind the flags' prefixes; null after reporting the bad parameter on `c`.
std::shared_ptr<const re2::RE2> RegexWithFlags(Call& c, bool plain_to_noncapturing);

// Gives a kRegex stage the regex `re` (every capture group named), its group names and its
// capture indexes, its leading literal bytes, its required literals and its prefilter.
void SetStageRegex(std::shared_ptr<const re2::RE2> re, Stage* st);
// Gives a kRawRegex / kFieldRegex node the regex `re`, its required literals and its prefilter.
void SetFilterRegex(std::shared_ptr<const re2::RE2> re, FilterNode* n);

std::shared_ptr<FilterNode> MakeNode(FilterNode::Kind kind, size_t position);
// A node `kind` (kAnd / kOr) over `a` and `b`.
FilterPtr Combine(FilterNode::Kind kind, FilterPtr a, FilterPtr b, size_t position);
// A node comparing a field (not set here) with `text`: kFieldGlob when `text` has a '*', else
// kFieldEq.
std::shared_ptr<FilterNode> MakeFieldMatch(std::string text, size_t position);

// Output field names of a metric (see Metric::as): percentile's `as` is a prefix.
std::vector<std::string> MetricOutputNames(const Metric& m);

}  // namespace sediment::query::functions
