// Heartbeat: what a node announces about itself on the chatter log every interval (DESIGN section
// 9). Wire format (versioned, CRC32C-checked) in cluster/FORMAT.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace sediment {

// Progress of one ingest partition that the sending node digests.
struct PartitionProgress {
  PartitionId partition;
  Epoch epoch;
  Offset next_offset;   // next commit-log offset the digest worker reads
  Offset replay_point;  // smallest offset not yet in a registered segment
  uint64_t buffered_events = 0;
  bool operator==(const PartitionProgress&) const = default;
};

// What the node's storage replicator reports (version 2 and later).
struct RepairProgress {
  uint64_t pending_segments = 0;  // copies this node should pull right now
  uint64_t pending_bytes = 0;
  uint64_t copied_segments = 0;  // since the process started
  uint64_t copied_bytes = 0;
  uint64_t failed = 0;            // pulls that failed
  uint64_t corrupt_detected = 0;  // local copies found corrupt
  uint64_t dropped_extra = 0;     // extra copies dropped
  bool operator==(const RepairProgress&) const = default;
};

// Offsets of one partition that the sending node's digest found deleted from the commit log
// before they were digested (their events are lost), since its process started (version 3 and
// later). At most kMaxRanges ranges, the newest; the totals count every range found.
struct LostOffsetsReport {
  static constexpr size_t kMaxRanges = 16;
  struct Range {
    Offset first;
    Offset end;  // exclusive
    int64_t detected_ms = 0;
    bool operator==(const Range&) const = default;
  };
  PartitionId partition;
  uint64_t range_count = 0;
  uint64_t offsets = 0;
  std::vector<Range> ranges;
  bool operator==(const LostOffsetsReport&) const = default;
};

struct Heartbeat {
  NodeId node;             // must be > 0
  std::string address;     // HTTP host:port peers and clients use
  int64_t sent_ms = 0;     // wall clock when sent
  int64_t started_ms = 0;  // wall clock when the node process started
  std::string version;
  Offset global_applied{-1};                  // Global offset this node has applied
  std::vector<PartitionProgress> partitions;  // partitions this node digests right now
  // Version 2: the oldest Global snapshot the node keeps (-1 none; the global topic is truncated
  // below the minimum over live nodes) and its repair progress.
  Offset oldest_snapshot{-1};
  RepairProgress repair;
  // Version 3: lost commit-log offsets the node's digest found, by partition (empty: none).
  std::vector<LostOffsetsReport> lost;
  bool operator==(const Heartbeat&) const = default;
};

// Encodes `hb` as one chatter record (magic "SDHB", version 3, fields, CRC32C trailer). At most
// LostOffsetsReport::kMaxRanges ranges per partition are encoded (the last ones).
std::string EncodeHeartbeat(const Heartbeat& hb);
// Decodes a record written by EncodeHeartbeat (version 1 records too: oldest_snapshot -1, no
// repair progress; versions 1 and 2: no lost offsets). Anything else (truncated, flipped bits,
// wrong magic
// or version, trailing bytes, out-of-range values, node <= 0) is Corruption; never reads outside
// `data` and never allocates more than `data` can describe.
Result<Heartbeat> DecodeHeartbeat(std::string_view data);

}  // namespace sediment
