// Segment file names: the one place that builds and parses them (in the spirit of leveldb's
// filename.h). A segment's file name is its `SegmentRecord::file_name` in Global, its file name in
// every node's segment directory and, after `segments/`, its bucket key; so the shapes below are
// part of the on-disk format (FORMAT.md "File names") and never change for existing files.
//
// Shapes sediment writes (all numbers decimal without leading zeros, `<hex8>` 8 lowercase hex
// digits of randomness):
//   p<partition>-e<epoch>-o<offset>-i<index>.seg                 flushed by the digest
//   r-p<partition>-e<epoch>-o<offset>-i<index>-<hex8>.seg       rebuilt by the digest from the log
//   m-p<partition>-o<offset>-i<index>-n<node>-<hex8>.seg        written by a merge
// where <offset>/<index> is the position of the segment's first event and <epoch> the claim epoch
// it was written under. Names must never repeat: the epoch (a flush), the random suffix (a rebuild,
// a merge) make a name that left Global never come back (the bucket collector relies on it).
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/types.h"

namespace sediment {

// Longest accepted segment file name, in bytes.
inline constexpr size_t kMaxSegmentFileNameBytes = 200;

// A name that may safely be used as a file in the segment directory or a bucket key suffix, e.g.
// one a peer or a bucket listing supplies: 1..200 bytes, only [A-Za-z0-9._-], ending in ".seg"
// with something before it, not starting with '.', no "..". Any such name is accepted, not only
// the shapes above (Global may list names of other shapes, e.g. written by tests or tools).
bool IsValidSegmentFileName(std::string_view name);

enum class SegmentFileKind { kFlushed, kRebuilt, kMerged };

// The fields of a name of one of the shapes above. `epoch` is 0 for kMerged, `node` 0 and `random`
// 0 where the shape has none.
struct SegmentFileName {
  SegmentFileKind kind = SegmentFileKind::kFlushed;
  PartitionId partition;
  Epoch epoch;
  Position first;  // position of the segment's first event
  NodeId node;
  uint32_t random = 0;

  // The name; ParseSegmentFileName(Format()) gives back *this.
  std::string Format() const;
};

// p<partition>-e<epoch>-o<offset>-i<index>.seg: a digest flush of a buffer starting at `first`.
std::string FlushedSegmentFileName(PartitionId partition, Epoch epoch, Position first);
// r-p<partition>-e<epoch>-o<offset>-i<index>-<hex8>.seg: a segment rebuilt from the commit log.
std::string RebuiltSegmentFileName(PartitionId partition, Epoch epoch, Position first,
                                   uint32_t random);
// m-p<partition>-o<offset>-i<index>-n<node>-<hex8>.seg: a merge output written by `node`.
std::string MergedSegmentFileName(PartitionId partition, Position first, NodeId node,
                                  uint32_t random);

// The fields of a name of one of the shapes above, written exactly as Format writes them (so
// parse and format round-trip). InvalidArgument for any other name (including valid names of
// other shapes: check IsValidSegmentFileName for "may this name be used").
Result<SegmentFileName> ParseSegmentFileName(std::string_view name);

}  // namespace sediment
