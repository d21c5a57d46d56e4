#include "storage/placement.h"

#include <xxhash.h>

#include <algorithm>

#include "common/coding.h"

namespace sediment {

uint64_t RendezvousScore(SegmentId segment, NodeId node) {
  char buf[16];
  EncodeFixed64(buf, static_cast<uint64_t>(segment.value));
  EncodeFixed64(buf + 8, static_cast<uint64_t>(node.value));
  return XXH64(buf, sizeof(buf), 0);
}

std::vector<NodeId> RankNodes(SegmentId segment, const std::vector<NodeId>& nodes) {
  std::vector<std::pair<uint64_t, NodeId>> scored;
  scored.reserve(nodes.size());
  for (NodeId n : nodes) scored.emplace_back(RendezvousScore(segment, n), n);
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  std::vector<NodeId> out;
  out.reserve(scored.size());
  for (const auto& [score, n] : scored) {
    if (!out.empty() && out.back() == n) continue;  // equal ids sort next to each other
    out.push_back(n);
  }
  return out;
}

std::vector<NodeId> DesiredHolders(const SegmentRecord& seg,
                                   const std::vector<NodeId>& present_nodes, uint32_t r) {
  const std::vector<NodeId> ranked = RankNodes(seg.id, present_nodes);
  std::vector<NodeId> out;
  for (NodeId n : ranked) {
    if (out.size() >= r) break;
    if (seg.replicas.count(n) != 0) out.push_back(n);
  }
  for (NodeId n : ranked) {
    if (out.size() >= r) break;
    if (seg.replicas.count(n) == 0) out.push_back(n);
  }
  return out;
}

}  // namespace sediment
