// Fuzz target: the ingest request-body parsers (ingest::ParseRequest), every format; for raw and
// HEC raw also the lines' path (ParseLineBatch and EncodeIngestLines), which must agree with it.
// Input: byte 0 picks the format (value % 5: humio-structured, humio-unstructured, raw, HEC
// event, HEC raw); the rest is the request body. Options as the server passes them
// (api/ingest_routes.cc): the server's default --max-event-bytes, and HEC URL parameters.
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "ingest/ingest.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static constexpr ingest::Format kFormats[] = {
      ingest::Format::kHumioStructured, ingest::Format::kHumioUnstructured, ingest::Format::kRaw,
      ingest::Format::kHecEvent, ingest::Format::kHecRaw};
  const ingest::Format format = kFormats[data[0] % 5];
  ingest::ParseOptions options;
  options.repo = "fuzz";
  options.now_ms = 1700000000000;
  // ServerConfig's defaults (--max-event-bytes, --max-json-depth, --max-fields-per-event).
  options.max_event_bytes = 1u << 20;
  options.max_json_depth = 64;
  options.max_fields_per_event = 1000;
  if (data[0] & 0x80) {
    options.params = {{"host", "h1"}, {"source", "s"}, {"sourcetype", "st"}, {"index", "main"}};
  }
  const std::string_view body = fuzz::Bytes(data + 1, size - 1);
  auto parsed = ingest::ParseRequest(format, body, options);
  if (format == ingest::Format::kRaw || format == ingest::Format::kHecRaw) {
    // The lines' path (ParseLineBatch, EncodeIngestLines) gives the same answer and records.
    auto batch = ingest::ParseLineBatch(format, body, options);
    if (batch.ok() != parsed.ok()) __builtin_trap();
    if (!parsed.ok()) {
      if (batch.status().code() != parsed.status().code() ||
          batch.status().message() != parsed.status().message()) {
        __builtin_trap();
      }
      return 0;
    }
    if (batch->lines.size() != parsed->event_count) __builtin_trap();
    size_t at = 0;
    for (const IngestMessage& m : parsed->messages) {
      const std::span<const std::string_view> lines(batch->lines.data() + at, m.events.size());
      at += m.events.size();
      const std::vector<Field> fields =
          m.events.empty() ? std::vector<Field>{} : m.events[0].fields;
      if (EncodeIngestLines(m.id, m.datasource, options.now_ms, options.now_ms, fields, lines) !=
          EncodeIngestMessage(m)) {
        __builtin_trap();
      }
    }
  }
  if (!parsed.ok()) return 0;
  // The contract of ingest/README.md, for every event of a parsed request.
  size_t events = 0;
  for (const IngestMessage& m : parsed->messages) {
    if (m.datasource.repo != options.repo) __builtin_trap();
    for (const Event& e : m.events) {
      ++events;
      if (e.ingest_ms != options.now_ms) __builtin_trap();
      if (e.raw.size() > options.max_event_bytes || e.ByteSize() > options.max_event_bytes) {
        __builtin_trap();  // should have been TooLarge
      }
      if (e.fields.size() > options.max_fields_per_event) __builtin_trap();  // TooLarge
      std::set<std::string_view> names;
      for (const Field& f : e.fields) {
        if (!names.insert(f.name).second) __builtin_trap();  // field names are unique
      }
    }
    // Every message must encode and decode back (what the digest reads from the commit log).
    auto back = DecodeIngestMessage(EncodeIngestMessage(m));
    if (!back.ok() || back->events != m.events) __builtin_trap();
  }
  if (events != parsed->event_count) __builtin_trap();
  return 0;
}
