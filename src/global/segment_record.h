// The Global record of a segment file just written: its footer summary (segment/segment.h)
// mirrored into a SegmentRecord (global.h). Header-only, so the global library itself does not
// link the segment library; its users (digest, merge, tests) do.
#pragma once

#include <string>
#include <utility>

#include "common/types.h"
#include "global/global.h"
#include "segment/segment.h"

namespace sediment {

// Every field of `info` (datasource, partition, position and time ranges, counts, sizes, content
// hash) plus the file name, the writing node and the claim epoch. The id and the replica list are
// the apply rule's to set.
inline SegmentRecord SegmentRecordFor(const SegmentInfo& info, std::string file_name, NodeId writer,
                                      Epoch epoch) {
  SegmentRecord rec;
  rec.datasource = info.datasource;
  rec.partition = info.partition;
  rec.min_pos = info.min_pos;
  rec.max_pos = info.max_pos;
  rec.min_ts = info.min_ts;
  rec.max_ts = info.max_ts;
  rec.event_count = info.event_count;
  rec.raw_bytes = info.raw_bytes;
  rec.file_size = info.file_size;
  rec.content_hash = info.content_hash;
  rec.epoch = epoch;
  rec.file_name = std::move(file_name);
  rec.node = writer;
  return rec;
}

}  // namespace sediment
