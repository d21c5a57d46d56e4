// Fuzz target: what nodes decode from each other besides the query wire: the coordinator's
// internal query requests (coordinator/INTERNAL_API.md: DecodeInternalQuery, DecodeCancel, the
// id lists of the answer headers, SplitIds) and the cluster heartbeats (cluster/FORMAT.md:
// DecodeHeartbeat) and node identity file (DecodeNodeIdFile); also the start/end bounds of every
// query request (query::ParseTimeRange; public API and internal requests alike).
// Input: byte 0 picks the decoder ((value & 0x7f) % 6), the rest is the body (time bounds: start,
// a newline, end); with bit 7 set the
// target appends the correct CRC32C to a heartbeat, so that mutations reach its decoder.
#include <cstddef>
#include <cstdint>

#include "cluster/heartbeat.h"
#include "cluster/node_identity.h"
#include "coordinator/internal_query.h"
#include "fuzz/fuzz_util.h"
#include "query/query.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in = fuzz::Bytes(data + 1, size - 1);
  switch ((data[0] & 0x7f) % 6) {
    case 0: {
      auto q = coordinator::DecodeInternalQuery(in);
      if (q.ok()) {
        auto back = coordinator::DecodeInternalQuery(coordinator::EncodeInternalQuery(*q));
        if (!back.ok() || back->query_string != q->query_string || back->segments != q->segments ||
            back->partitions != q->partitions) {
          __builtin_trap();
        }
      }
      break;
    }
    case 1:
      (void)coordinator::DecodeCancel(in);
      break;
    case 2:
      (void)coordinator::JoinIds(coordinator::SplitIds(in));
      break;
    case 3:
      (void)DecodeHeartbeat((data[0] & 0x80) ? fuzz::WithTrailingCrc(in) : std::string(in));
      break;
    case 4:
      (void)DecodeNodeIdFile(in);
      break;
    case 5: {
      const size_t nl = in.find('\n');
      const std::string_view start = in.substr(0, nl);
      const std::string_view end = nl == std::string_view::npos ? "" : in.substr(nl + 1);
      (void)query::ParseTimeRange(start, end, 1700000000000);
      break;
    }
  }
  return 0;
}
