// Fuzz target: the query language (query::Compile) and, for queries that compile, their execution
// over a few fixed buffered events (the functions' own parsers: parseJson, kvParse, regex,
// formatTime, ...); and query::BindParameters, whose output must compile. Input: the query text.
// Bounds as the server's: one worker thread here, a deadline, and the memory bound of ExecOptions.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "query/query.h"

using namespace sediment;

namespace {

std::shared_ptr<const std::vector<PositionedEvent>> Events() {
  auto events = std::make_shared<std::vector<PositionedEvent>>();
  auto add = [&](int64_t ts, std::string raw, std::vector<Field> fields) {
    Event e;
    e.timestamp_ms = ts;
    e.ingest_ms = ts + 5;
    e.raw = std::move(raw);
    e.fields = std::move(fields);
    events->push_back(
        PositionedEvent{Position{Offset(static_cast<int64_t>(events->size())), 0}, std::move(e)});
  };
  add(1700000000000, R"({"a":{"b":[1,2,{"c":"x"}]},"n":12.5,"s":"hello world"})",
      {{"host", "web-1"}, {"status", "200"}, {"bytes", "1234"}});
  add(1700000001000, "GET /index.html status=404 user=\"bob smith\" ms=17 a=b=c",
      {{"host", "web-2"}, {"status", "404"}, {"bytes", "-7"}, {"t", "2024-01-02T03:04:05Z"}});
  add(1700000002000, "ERROR disk full\tkey=value;k2='q v' 0x1f 3.5e10 \xc3\xa9\xff",
      {{"host", "web-1"}, {"status", "500"}, {"msg", "{\"x\":[true,null]}"}, {"empty", ""}});
  add(1700000003000, "", {{"host", ""}, {"n", "9223372036854775807"}, {"d", "-1e308"}});
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

// Saved searches for `$name()` calls: "q" (a parameter with a default), "p" (one without), "loop"
// (calls itself).
class FuzzSavedQueries final : public query::SavedQueries {
 public:
  std::optional<std::string> Find(std::string_view name) const override {
    if (name == "q") return std::string("status=?{code=500} | x := ?n");
    if (name == "p") return std::string("host=?h");
    if (name == "loop") return std::string("a | $loop()");
    return std::nullopt;
  }
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Saved query calls and query parameters: a text whose calls expand and whose parameters
  // could be bound compiles without arguments (what the server runs and sends to other nodes).
  static const std::map<std::string, std::string> kArguments = {
      {"x", "a \"b\" \\ *"}, {"code", "404"}, {"n", "-2.5"}, {"empty", ""}};
  static const FuzzSavedQueries kSaved;
  auto expanded = query::ExpandSavedQueries(fuzz::Bytes(data, size), kSaved, kArguments);
  if (expanded.ok()) {
    auto bound = query::BindParameters(*expanded, kArguments);
    if (bound.ok() && !query::Compile(*bound).ok()) __builtin_trap();
  }
  auto compiled = query::Compile(fuzz::Bytes(data, size));
  if (!compiled.ok()) return 0;
  static const auto events = Events();
  query::ScanInput input;
  input.buffered.push_back(
      query::BufferedSource{Datasource{"fuzz", {{"#type", "accesslog"}}}, PartitionId(0), events});
  query::ExecOptions options;
  options.threads = 1;
  options.max_memory_bytes = 64u << 20;
  options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  // One hour around the events: a long range would make every bucket()/timeChart() fill up to
  // 100,000 buckets (the product's bound), which only slows the search down.
  const query::TimeRange range{1699999000000, 1700002600000};
  (void)query::Execute(nullptr, **compiled, range, input, options);
  return 0;
}
