// Fuzz target: the query functions that parse event contents, i.e. ingested (outside) bytes:
// parseJson, kvParse, regex, split, formatTime, the expression functions, free-text and field
// filters, and the aggregates that read numbers from fields.
// Input: byte 0 picks a query of the list below; the rest is one event's @rawstring, also given
// as its field `f`. Executed as query_fuzz executes (one thread, the ExecOptions memory bound).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "query/query.h"

using namespace sediment;

namespace {

const std::vector<std::shared_ptr<const query::CompiledQuery>>& Queries() {
  static const auto queries = [] {
    std::vector<std::shared_ptr<const query::CompiledQuery>> out;
    for (const char* text : {
             "parseJson()",
             "parseJson(prefix=p.) | split(p.a) | table([p.a, _index])",
             "parseJson() | split(strip=true)",
             "kvParse()",
             "kvParse(override=true) | groupBy(f)",
             R"q(regex("(?<user>\\w+)=(?<v>\\d+)"))q",
             R"q(regex("^(?<a>[^ ]*) (?<b>.*)$", flags=i, strict=false))q",
             R"q(formatTime("%Y-%m-%d %H:%M:%S.%L %j %a %b %e %y %Z", as=t, field=f))q",
             R"q(formatTime("%H:%M", as=t, timezone="+02:00"))q",
             "n := tonumber(f) | m := round(n * 2) | sum(n) ",
             "eval(l=length(f), u=upper(f), s=substr(f, 2, 3), t=trim(f), c=concat(f, \"x\"))",
             "lower(f) | length(@rawstring)",
             "error",
             "f=*a*b* | @rawstring=/x+y/i",
             "f > 10 | avg(f)",
             "percentile(f, percentiles=[1, 50, 99.9])",
             "count(f, distinct=true)",
             "parseJson() | kvParse() | top(f)",
             "case { f=/^a/ | x := \"a\" ; * | x := f }",
             "in(f, values=[\"a*\", \"*b\"], ignoreCase=true)",
         }) {
      auto q = query::Compile(text);
      if (!q.ok()) {
        std::fprintf(stderr, "event_fuzz: query does not compile: %s\n", text);
        __builtin_trap();
      }
      out.push_back(*q);
    }
    return out;
  }();
  return queries;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  (void)Queries();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& queries = Queries();
  const query::CompiledQuery& q = *queries[data[0] % queries.size()];
  auto events = std::make_shared<std::vector<PositionedEvent>>();
  Event e;
  e.timestamp_ms = 1700000000000;
  e.ingest_ms = 1700000000005;
  e.raw = std::string(fuzz::Bytes(data + 1, size - 1));
  e.fields = {{"f", e.raw}, {"host", "h"}};
  events->push_back(PositionedEvent{Position{Offset(1), 0}, e});
  e.timestamp_ms += 1000;
  events->push_back(PositionedEvent{Position{Offset(2), 0}, std::move(e)});
  query::ScanInput input;
  input.buffered.push_back(query::BufferedSource{Datasource{"fuzz", {}}, PartitionId(0), events});
  query::ExecOptions options;
  options.threads = 1;
  options.max_memory_bytes = 64u << 20;
  options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  (void)query::Execute(nullptr, q, query::TimeRange{1699999000000, 1700002600000}, input, options);
  return 0;
}
