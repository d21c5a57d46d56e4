// Fuzz target: the Elastic bulk and LogScale JSON body parsers (ingest::ParseRequest with
// kElasticBulk and kJson). Input: byte 0 picks the format (bit 0: bulk or JSON; bit 7: a path
// {index} for bulk); the rest is the request body. Options as the server passes them.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "ingest/ingest.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool bulk = (data[0] & 1) == 0;
  ingest::ParseOptions options;
  options.repo = "fuzz";
  options.now_ms = 1700000000000;
  options.max_event_bytes = 1u << 20;
  options.max_json_depth = 64;
  options.max_fields_per_event = 1000;
  if (data[0] & 0x80) options.bulk_index = "idx";
  auto parsed = ingest::ParseRequest(bulk ? ingest::Format::kElasticBulk : ingest::Format::kJson,
                                     fuzz::Bytes(data + 1, size - 1), options);
  if (!parsed.ok()) return 0;
  size_t events = 0;
  for (const IngestMessage& m : parsed->messages) {
    if (m.datasource.repo != options.repo) __builtin_trap();
    for (const Event& e : m.events) {
      ++events;
      if (e.ingest_ms != options.now_ms) __builtin_trap();
      if (e.raw.size() > options.max_event_bytes || e.ByteSize() > options.max_event_bytes) {
        __builtin_trap();
      }
      if (e.fields.size() > options.max_fields_per_event + 2) __builtin_trap();  // + _index, _id
      std::set<std::string_view> names;
      for (const Field& f : e.fields) {
        if (!names.insert(f.name).second) __builtin_trap();    // field names are unique
        if (f.name == "@timestamp" && bulk) __builtin_trap();  // taken as the event's time
      }
    }
    auto back = DecodeIngestMessage(EncodeIngestMessage(m));
    if (!back.ok() || back->events != m.events) __builtin_trap();
  }
  if (events != parsed->event_count) __builtin_trap();
  if (bulk) {
    // Exactly the items answered 201 are events; every refused item says why.
    size_t created = 0;
    for (const ingest::BulkItem& item : parsed->items) {
      if (item.status == 201) {
        ++created;
      } else if (item.status != 400 || item.error_type.empty() || item.error_reason.empty()) {
        __builtin_trap();
      }
      if (item.id.empty()) __builtin_trap();
      if (item.action != "index" && item.action != "create" && item.action != "delete" &&
          item.action != "update") {
        __builtin_trap();
      }
    }
    if (created != events) __builtin_trap();
  } else if (!parsed->items.empty()) {
    __builtin_trap();
  }
  return 0;
}
