// Fuzz target: the built-in parsers at ingest (parsers::Builtin), on one line of outside bytes.
// Input: byte 0 picks the parser (value % 5: accesslog, syslog, kv, json, csv(a,b,c)); the rest is
// the line (@rawstring). Checks the contract of parsers/README.md for built-ins: exactly one event
// out, field names unique; for a native parser the line kept as it came, a failure marked with
// @error and
// @error_msg and its output within its bound (Parser::Bounded) for a native parser.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "parsers/parsers.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* kNames[] = {"accesslog", "syslog", "kv", "json", "csv(a,b,c)"};
  auto parser = parsers::Builtin(kNames[data[0] % 5]);
  if (parser == nullptr) __builtin_trap();
  parsers::TaggedEvent in;
  in.event.raw = std::string(fuzz::Bytes(data + 1, size - 1));
  in.event.timestamp_ms = 1700000000000;
  in.event.ingest_ms = 1700000000000;
  const size_t in_bytes = in.event.ByteSize();
  std::vector<parsers::TaggedEvent> out;
  parser->Run(in, &out);
  if (out.size() != 1) __builtin_trap();  // built-ins never drop or split
  const Event& e = out[0].event;
  // (A JSON or kv line may set @rawstring itself, as a parser may in LogScale.)
  if (parser->Bounded() && e.raw != in.event.raw) __builtin_trap();
  if (e.ingest_ms != in.event.ingest_ms) __builtin_trap();
  std::set<std::string_view> names;
  for (const Field& f : e.fields) {
    if (!names.insert(f.name).second) __builtin_trap();
  }
  if (parser->Bounded()) {
    // (kv and json may set any field, @error too: the line's own pairs.)
    const std::string* error = e.Find("@error");
    if (error != nullptr && (*error != "true" || e.Find("@error_msg") == nullptr)) {
      __builtin_trap();
    }
    if (e.ByteSize() > 2 * in_bytes + 1024) __builtin_trap();
  }
  return 0;
}
