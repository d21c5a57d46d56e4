// Test-only helpers for the storage tests: temp dirs and real segment files. Never linked into the
// server.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "common/env.h"
#include "common/testing/temp_dir.h"
#include "global/global.h"
#include "global/segment_record.h"
#include "segment/segment.h"

namespace sediment::storage_testing {

using sediment::TempDir;

inline Datasource TestDs(const std::string& host = "web-1") {
  Datasource ds;
  ds.repo = "repo";
  ds.tags = {{"#host", host}};
  return ds;
}

// Writes a segment of `events` events at offsets [first_offset, first_offset + events) of
// partition 0 to dir/file_name and returns its record (id unset, replicas {node}). `pad` bytes of
// incompressible-ish text per event make the file bigger.
inline SegmentRecord WriteTestSegment(Env* env, const std::string& dir,
                                      const std::string& file_name, int64_t first_offset,
                                      int events, NodeId node, size_t pad = 0) {
  EXPECT_TRUE(env->CreateDirs(dir).ok());
  std::vector<PositionedEvent> evs;
  uint64_t x = static_cast<uint64_t>(first_offset) * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < events; ++i) {
    PositionedEvent pe;
    pe.pos = Position{Offset(first_offset + i), 0};
    pe.event.timestamp_ms = 1'700'000'000'000 + first_offset + i;
    pe.event.ingest_ms = pe.event.timestamp_ms;
    pe.event.raw = file_name + " event " + std::to_string(first_offset + i) + " ";
    for (size_t k = 0; k < pad; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      pe.event.raw.push_back(static_cast<char>('a' + x % 26));
    }
    evs.push_back(std::move(pe));
  }
  auto info = WriteSegment(env, JoinPath(dir, file_name), TestDs(), PartitionId(0), evs);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return SegmentRecord{};
  SegmentRecord r = SegmentRecordFor(*info, file_name, node, Epoch(0));
  r.replicas = {node};
  return r;
}

}  // namespace sediment::storage_testing
