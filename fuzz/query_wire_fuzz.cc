// Fuzz target: the query wire formats a coordinator decodes from peers (query/WIRE.md):
// DecodeMatchSet and DecodePartial, then the partial's collector state through FinishPartials
// (each aggregate function decodes its own state) for one of a few aggregate queries.
// Input: byte 0 = flags, the rest = the frame. Flags bit 0: partial result (else match set);
// bit 1: the target appends the correct trailing CRC32C; bits 2..: which query (partials).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "query/query.h"
#include "query/wire.h"

using namespace sediment;

namespace {

// The queries whose partial states are decoded; every aggregate family is represented.
const std::vector<std::shared_ptr<const query::CompiledQuery>>& Queries() {
  static const auto queries = [] {
    std::vector<std::shared_ptr<const query::CompiledQuery>> out;
    for (const char* text : {
             "error",
             "count()",
             "groupBy(host)",
             "groupBy([host, status], function=[count(), sum(bytes), avg(bytes), max(bytes)])",
             "sort(bytes, limit=5)",
             "table([host, status])",
             "top(host)",
             "head(3)",
             "tail(3)",
             "count(host, distinct=true)",
             "timeChart(span=1h)",
             "bucket(span=1m)",
             "min(bytes) | eval(x=_min*2)",
             "stats([count(), percentile(bytes, percentiles=[50, 99])])",
             "select([host])",
         }) {
      auto q = query::Compile(text);
      if (q.ok()) out.push_back(*q);
    }
    if (out.empty()) __builtin_trap();
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
  const std::string_view in = fuzz::Bytes(data + 1, size - 1);
  const std::string bytes = (data[0] & 2) ? fuzz::WithTrailingCrc(in) : std::string(in);
  if (data[0] & 1) {
    auto partial = query::DecodePartial(bytes);
    if (!partial.ok()) return 0;
    const auto& queries = Queries();
    const query::CompiledQuery& q = *queries[(data[0] >> 2) % queries.size()];
    std::vector<query::PartialResult> partials;
    partials.push_back(std::move(*partial));
    query::ExecOptions options;
    options.threads = 1;
    options.max_memory_bytes = 64u << 20;
    (void)query::FinishPartials(q, query::TimeRange{1699999000000, 1700002600000},
                                std::move(partials), options);
  } else {
    auto set = query::DecodeMatchSet(bytes);
    if (!set.ok()) return 0;
    for (const query::BufferedSource& s : set->sources) {
      if (!s.events) __builtin_trap();  // the decoder promises non-null event lists
    }
    auto again = query::DecodeMatchSet(query::EncodeMatchSet(*set));
    if (!again.ok() || again->sources.size() != set->sources.size()) __builtin_trap();
  }
  return 0;
}
