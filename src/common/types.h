// Distinct types for the numbers that must never be mixed up: commit-log offsets, partitions,
// claim epochs, node ids, segment ids, event positions.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace sediment {

template <typename Tag, typename Rep>
struct StrongInt {
  Rep value{};
  constexpr StrongInt() = default;
  constexpr explicit StrongInt(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongInt&) const = default;
  constexpr bool operator==(const StrongInt&) const = default;
};

struct OffsetTag {};
struct PartitionTag {};
struct EpochTag {};
struct NodeIdTag {};
struct SegmentIdTag {};

// Position of a record in one commit-log partition. The first record of a partition has offset 0.
using Offset = StrongInt<OffsetTag, int64_t>;
using PartitionId = StrongInt<PartitionTag, int32_t>;
// Claim epoch of a partition (DESIGN section 6); 0 = never claimed.
using Epoch = StrongInt<EpochTag, int64_t>;
using NodeId = StrongInt<NodeIdTag, int64_t>;
using SegmentId = StrongInt<SegmentIdTag, int64_t>;

// Position of one event: the offset of its ingest message plus its index inside the message.
// Positions order the events of one datasource.
struct Position {
  Offset offset;
  uint32_t index = 0;
  constexpr auto operator<=>(const Position&) const = default;
  constexpr bool operator==(const Position&) const = default;
};

// "3-1234-5" (partition-offset-index): the event's @id, unique across the cluster.
std::string FormatEventId(PartitionId p, Position pos);

}  // namespace sediment

template <typename Tag, typename Rep>
struct std::hash<sediment::StrongInt<Tag, Rep>> {
  size_t operator()(const sediment::StrongInt<Tag, Rep>& v) const noexcept {
    return std::hash<Rep>()(v.value);
  }
};
