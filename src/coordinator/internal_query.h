// The request body and answer headers of the node-to-node query protocol
// (coordinator/INTERNAL_API.md). One codec, used by the coordinator that asks and by the routes
// that answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "query/lookup.h"
#include "query/query.h"

namespace sediment::coordinator {

// Paths of the internal query routes.
inline constexpr std::string_view kBuffersPath = "/internal/v1/query/buffers";
inline constexpr std::string_view kPartialPath = "/internal/v1/query/partial";
inline constexpr std::string_view kSegmentsPath = "/internal/v1/query/segments";
inline constexpr std::string_view kCancelPath = "/internal/v1/query/cancel";

// Answer headers (INTERNAL_API.md says who sends which).
inline constexpr std::string_view kGlobalAppliedHeader = "X-Sediment-Global-Applied";
inline constexpr std::string_view kMissingPartitionsHeader = "X-Sediment-Missing-Partitions";
inline constexpr std::string_view kUnreadableSegmentsHeader = "X-Sediment-Unreadable-Segments";
inline constexpr std::string_view kSegmentsNotHeldHeader = "X-Sediment-Segments-Not-Held";

// Body of the buffers, partial and segments requests.
struct InternalQuery {
  std::string repo;
  std::string query_string;
  query::TimeRange range;
  std::vector<std::pair<PartitionId, Epoch>> partitions;  // buffers
  std::vector<SegmentId> segments;                        // partial, segments
  std::vector<std::string> segment_files;                 // their file names (same order)
  size_t max_events = SIZE_MAX;                           // the segments endpoint only
  std::string query_id;                                   // for the cancel route
  int64_t timeout_ms = 0;                                 // time left; 0 = no limit
  uint64_t max_memory_bytes = 0;                          // 0 = no bound
  // The results of the query's defineTable()/join() subqueries, which the coordinator ran
  // first: the node compiles the query with them (query::Compile(text, files, &tables)).
  query::BoundTables tables;
};

std::string EncodeInternalQuery(const InternalQuery& q);
// InvalidArgument naming the field when `body` is not a valid internal query.
Result<InternalQuery> DecodeInternalQuery(std::string_view body);

// Body of the cancel route: {"queryId": "..."}.
std::string EncodeCancel(const std::string& query_id);
Result<std::string> DecodeCancel(std::string_view body);

// "1,2,3" (at most `max_items`, then ",... (N in all)"), the id lists of the headers and warnings.
std::string JoinIds(const std::vector<int64_t>& ids, size_t max_items = 20);
// The integers of a JoinIds text (entries that are not integers are skipped).
std::vector<int64_t> SplitIds(std::string_view text);

}  // namespace sediment::coordinator
