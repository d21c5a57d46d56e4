// Fuzz target: OTLP/HTTP logs (ingest::ParseRequest with Format::kOtlpLogs, parse_otlp.cc), both
// encodings, and the answers built from a parsed request.
// Input: byte 0 bit 0 picks the encoding (0 protobuf, 1 OTLP/JSON); bit 1 uses small event
// bounds (4 KiB events, 16 fields, depth 4) so that records are refused one by one (partial
// success); the rest is the request body. Otherwise options as the server passes them
// (api/ingest_routes.cc): the defaults of --max-event-bytes, --max-json-depth and
// --max-fields-per-event.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "ingest/ingest.h"
#include "ingest/otlp.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool json = data[0] & 1;
  ingest::ParseOptions options;
  options.repo = "fuzz";
  options.now_ms = 1700000000000;
  options.content_type = json ? "application/json" : "application/x-protobuf";
  options.max_event_bytes = 1u << 20;
  options.max_json_depth = 64;
  options.max_fields_per_event = 1000;
  if (data[0] & 2) {
    options.max_event_bytes = 4096;
    options.max_json_depth = 4;
    options.max_fields_per_event = 16;
  }
  auto parsed =
      ingest::ParseRequest(ingest::Format::kOtlpLogs, fuzz::Bytes(data + 1, size - 1), options);
  const ingest::OtlpEncoding encoding =
      json ? ingest::OtlpEncoding::kJson : ingest::OtlpEncoding::kProtobuf;
  if (!parsed.ok()) {
    // A request refused whole has no partial answer, only an error body.
    if (ingest::OtlpErrorBody(encoding, 400, parsed.status().message()).empty()) __builtin_trap();
    return 0;
  }
  // The contract of ingest/README.md, for every event of a parsed request.
  size_t events = 0;
  for (const IngestMessage& m : parsed->messages) {
    if (m.datasource.repo != options.repo) __builtin_trap();
    for (const Event& e : m.events) {
      ++events;
      if (e.ingest_ms != options.now_ms) __builtin_trap();
      if (e.raw.size() > options.max_event_bytes || e.ByteSize() > options.max_event_bytes) {
        __builtin_trap();  // should have been refused
      }
      if (e.fields.size() > options.max_fields_per_event) __builtin_trap();
      std::set<std::string_view> names;
      for (const Field& f : e.fields) {
        if (!names.insert(f.name).second) __builtin_trap();  // field names are unique
      }
    }
    auto back = DecodeIngestMessage(EncodeIngestMessage(m));
    if (!back.ok() || back->events != m.events) __builtin_trap();
  }
  if (events != parsed->event_count) __builtin_trap();
  if ((parsed->rejected_count == 0) != parsed->rejected_message.empty()) __builtin_trap();
  const std::string answer = ingest::OtlpLogsResponse(encoding, *parsed);
  if ((parsed->rejected_count == 0) != (answer.empty() || answer == "{}")) __builtin_trap();
  return 0;
}
