// JSON helpers of parse_json.cc shared with the other JSON format parsers (Elastic bulk, LogScale
// JSON). Not part of the library's contract.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/internal.h"

namespace sediment::ingest::internal {

// "an object", "a string", ... for messages.
const char* JsonTypeName(simdjson::dom::element e);
// `s` quoted for a message, cut at 64 bytes.
std::string QuoteForMessage(std::string_view s);
// Flattens the members of `obj` into `out` as every JSON format does (README.md: nested objects
// as a.b, arrays as a[0], strings as they are, other scalars as JSON text), within the event's
// bounds (max_event_bytes, max_json_depth, max_fields_per_event): TooLarge naming `where` and the
// bound (its flag) crossed.
Status FlattenJsonObject(simdjson::dom::object obj, const ParseOptions& options,
                         const std::string& where, std::vector<Field>* out);
// A JSON timestamp member named `name`: a number or numeric string in `unit`, or, when allow_iso,
// an ISO-8601 string. InvalidArgument naming `where` otherwise.
Status JsonTimestampMillis(simdjson::dom::element v, const char* name, EpochUnit unit,
                           bool allow_iso, const std::string& where, int64_t* out);

}  // namespace sediment::ingest::internal
