// Where a query reads each segment and whom it asks for buffered events: pure functions of one
// Global state and the liveness of the nodes (no I/O).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "global/global.h"
#include "query/query.h"

namespace sediment::coordinator {

// Partition -> (owner node, claim epoch) of every claimed partition.
using PartitionOwners = std::map<int32_t, std::pair<int64_t, Epoch>>;
PartitionOwners OwnersOf(const GlobalState& state);

// The segments of one query attempt, by where they are read.
struct SegmentPlan {
  std::vector<SegmentRecord> local;                      // this node reads its own copy
  std::map<int64_t, std::vector<SegmentRecord>> remote;  // holder node -> segments it reads
  std::vector<SegmentRecord> from_bucket;  // no usable copy on a live node; uploaded: fetched here
  std::vector<SegmentRecord> unreachable;  // none of the above: named in a warning
};

struct PlanContext {
  NodeId self;
  bool has_bucket = false;
  // Copies not to read, (segment id, holder): found unreadable, or held by a node that failed.
  const std::set<std::pair<int64_t, int64_t>>* excluded = nullptr;
  // Nodes that did not answer this query: none of their copies is read.
  const std::set<int64_t>* stalled = nullptr;
  // Segments this query already read through the bucket (into this node's cache): when this
  // node's copy of one of them was then found unreadable, the bucket is not tried again.
  const std::set<int64_t>* via_bucket = nullptr;
  // Whether this node has a file of that name now.
  std::function<bool(const std::string& file_name)> holds_file;
  // Whether a peer is alive and has an address.
  std::function<bool(NodeId)> serving;
};

// The holder to read `seg` from: this node when it holds a usable copy, else one of the live
// holders not excluded (spread by segment id), else -1.
int64_t ChooseHolder(const SegmentRecord& seg, const PlanContext& ctx);

// Plans the committed segments of `repo` that overlap `range`.
SegmentPlan PlanSegments(const GlobalState& state, const std::string& repo,
                         const query::TimeRange& range, const PlanContext& ctx);

}  // namespace sediment::coordinator
