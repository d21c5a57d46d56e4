// Internals shared by the ingest parsers. Not part of the library's contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ingest/ingest.h"

namespace sediment::ingest::internal {

// Collects a request's events by datasource (in order of first appearance; request order within a
// datasource) and cuts them into size-bounded messages. Not thread-safe.
class Builder {
 public:
  explicit Builder(const ParseOptions& options) : options_(options) {}

  // The event list of datasource (options.repo, tags); tags are normalized here. The returned
  // pointer stays valid until the next call of Events or Finish.
  std::vector<Event>* Events(std::vector<std::pair<std::string, std::string>> tags);

  // Moves the events into messages of at most about max_message_bytes each.
  ParseResult Finish();

 private:
  struct Group {
    Datasource datasource;
    std::vector<Event> events;
  };
  const ParseOptions& options_;
  std::vector<Group> groups_;
  std::unordered_map<std::string, size_t> by_key_;
};

// True when the event's @rawstring or ByteSize() exceeds options.max_event_bytes.
inline bool TooBig(const Event& event, const ParseOptions& options) {
  return event.raw.size() > options.max_event_bytes || event.ByteSize() > options.max_event_bytes;
}
// TooLarge naming `where` when the event exceeds options.max_event_bytes (see TooBig).
Status CheckEventSize(const Event& event, const ParseOptions& options, const std::string& where);
// Same check on the raw text alone, before an event is built.
Status CheckRawSize(size_t raw_bytes, const ParseOptions& options, const std::string& where);
// CheckEventSize of an event not built: its raw text's size and its ByteSize().
Status CheckEventBytes(size_t raw_bytes, size_t event_bytes, const ParseOptions& options,
                       const std::string& where);

// Removes repeated field names: the first occurrence keeps its place and takes the last value.
void DedupFields(std::vector<Field>* fields);

// A decimal number as text ("1700000000", "-1.5", "1700000000123.9") to ms since the epoch.
// kSeconds: the number is seconds (fraction truncated to ms). kAuto: |n| < 1e11 is seconds, larger
// is ms (fraction truncated). Exponent forms go through double and are rounded to the nearest ms.
// nullopt when `s` is not such a number or is out of the supported range (years 1..9999).
enum class EpochUnit { kSeconds, kAuto };
std::optional<int64_t> ParseEpochText(std::string_view s, EpochUnit unit);
// The same for a number already parsed as a double (rounded to the nearest ms for seconds).
std::optional<int64_t> EpochFromDouble(double v, EpochUnit unit);
std::optional<int64_t> EpochFromInt(int64_t v, EpochUnit unit);

// "#name" unless `name` already starts with '#'.
std::string TagName(std::string_view name);

// The format parsers. `body` is the whole request body.
Result<ParseResult> ParseHumioStructured(std::string_view body, const ParseOptions& options);
Result<ParseResult> ParseHumioUnstructured(std::string_view body, const ParseOptions& options);
Result<ParseResult> ParseHecEvents(std::string_view body, const ParseOptions& options);
// raw and HEC raw: one event per line. `hec` adds host/source/sourcetype/channel from params and
// also splits on a lone '\r'. ScanLines gives the lines as views into `body` (ParseLineBatch),
// ParseLines their events.
Result<LineBatch> ScanLines(std::string_view body, const ParseOptions& options, bool hec);
Result<ParseResult> ParseLines(std::string_view body, const ParseOptions& options, bool hec);
// OTLP/HTTP logs (parse_otlp.cc), protobuf or JSON by options.content_type.
Result<ParseResult> ParseOtlpLogs(std::string_view body, const ParseOptions& options);
// Elastic bulk NDJSON (parse_elastic_bulk.cc): per-action outcomes in ParseResult::items; an error
// only when the body is not a bulk body (a malformed or unknown action line, a missing source).
Result<ParseResult> ParseElasticBulk(std::string_view body, const ParseOptions& options);
// LogScale's /api/v1/ingest/json (parse_logscale_json.cc): an object, or an array of objects.
Result<ParseResult> ParseLogScaleJson(std::string_view body, const ParseOptions& options);

}  // namespace sediment::ingest::internal
