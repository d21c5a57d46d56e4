// Where segment copies should live (DESIGN section 8): rendezvous (highest-random-weight) hashing
// of (segment id, node id), made sticky so that existing copies stay where they are.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.h"
#include "global/global.h"

namespace sediment {

// The rank weight of `node` for `segment`: XXH64 (seed 0) of the 16 bytes
// fixed64(segment id) || fixed64(node id), little-endian. Higher ranks first.
uint64_t RendezvousScore(SegmentId segment, NodeId node);

// `nodes` ordered best first for `segment` (score descending, ties by lower node id), without
// duplicates.
std::vector<NodeId> RankNodes(SegmentId segment, const std::vector<NodeId>& nodes);

// The nodes that should hold `seg`, at most r of them, all from `present_nodes`: first the present
// nodes that already hold a copy (seg.replicas) in rank order, then present non-holders in rank
// order, until r are chosen. Sticky: an existing present copy is never displaced by a better-ranked
// node, so adding a node moves no data; copies are created on the best-ranked nodes only when a
// holder is missing. Deterministic for a given (seg.id, seg.replicas, set of present nodes, r).
std::vector<NodeId> DesiredHolders(const SegmentRecord& seg,
                                   const std::vector<NodeId>& present_nodes, uint32_t r);

}  // namespace sediment
